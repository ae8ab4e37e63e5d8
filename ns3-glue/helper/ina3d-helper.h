/*
 * ina3d glue: builds the network of an emitted directory and installs the applications.
 */
#ifndef INA3D_HELPER_H
#define INA3D_HELPER_H

#include "../model/ina-apps.h"
#include "../model/ina3d-pair-routing.h"

#include "ns3/ipv4-routing-helper.h"
#include "ns3/point-to-point-module.h"

#include <string>
#include <vector>

namespace ns3
{

/**
 * Installs Ina3dPairRouting as the routing protocol of a node (the tables are filled
 * from routes.txt by Ina3dHelper::ReadRoutes).
 */
class Ina3dPairRoutingHelper : public Ipv4RoutingHelper
{
  public:
    Ina3dPairRoutingHelper* Copy() const override;
    Ptr<Ipv4RoutingProtocol> Create(Ptr<Node> node) const override;
};

/**
 * Reads params.txt, topology.txt (HPCC 3-field or SimAI 6-field header) and routes.txt
 * written by `ina3d ns3 emit`, builds point-to-point links with their rates and delays,
 * installs the Internet stack on every node with Ina3dPairRouting (every packet takes the
 * path ina3d computed for its (source, destination) pair, the replayer's path) and the
 * ina3d applications.
 * Every Read* returns false with a message naming the file, line and field.
 */
class Ina3dHelper
{
  public:
    bool ReadParams(const std::string& path, GlueParams& p, std::string& err);
    /** Reads reservations.txt (planned INA policy) into dag.reservations. */
    bool ReadReservations(const std::string& path, Dag& dag, std::string& err);
    bool ReadTopology(const std::string& path, std::string& err);
    /** Creates nodes, links, addresses; must follow ReadTopology. */
    void BuildNetwork(const GlueParams& p);
    bool ReadRoutes(const std::string& path, std::string& err);
    /** One InaHostApplication per host, one InaSwitchApplication per aggregating switch. */
    ApplicationContainer InstallApplications();

    uint32_t NodeCount() const
    {
        return m_isSwitch.size();
    }
    const std::vector<bool>& IsSwitch() const
    {
        return m_isSwitch;
    }

  private:
    struct LinkSpec
    {
        uint32_t a, b;
        std::string rate, delay;
    };
    struct Port
    {
        uint32_t ifIndex;
        Ipv4Address peer;
    };
    /** The two ends of a topology.txt link, by row. */
    struct LinkPorts
    {
        Port atA; //!< interface on node a, address of b
        Port atB; //!< interface on node b, address of a
    };
    /** This node's pair routing protocol. */
    Ptr<Ina3dPairRouting> Routing(uint32_t node) const;
    std::vector<LinkPorts> m_linkPorts;
    std::vector<bool> m_isSwitch;
    std::vector<LinkSpec> m_links;
    NodeContainer m_nodes;
    std::map<std::pair<uint32_t, uint32_t>, Port> m_ports;
};

} // namespace ns3

#endif
