/*
 * ina3d glue: builds the network of an emitted directory and installs the applications.
 */
#ifndef INA3D_HELPER_H
#define INA3D_HELPER_H

#include "../model/ina-apps.h"

#include "ns3/point-to-point-module.h"

#include <string>
#include <vector>

namespace ns3
{

/**
 * Reads params.txt, topology.txt (HPCC 3-field or SimAI 6-field header) and routes.txt
 * written by `ina3d ns3 emit`, builds point-to-point links with their rates and delays,
 * installs the Internet stack on every node (switches are IP routers with static host
 * routes, so packets take the paths ina3d computed) and the ina3d applications.
 * Every Read* returns false with a message naming the file, line and field.
 */
class Ina3dHelper
{
  public:
    bool ReadParams(const std::string& path, GlueParams& p, std::string& err);
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
    std::vector<bool> m_isSwitch;
    std::vector<LinkSpec> m_links;
    NodeContainer m_nodes;
    std::map<std::pair<uint32_t, uint32_t>, Port> m_ports;
};

} // namespace ns3

#endif
