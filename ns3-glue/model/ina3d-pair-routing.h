/*
 * ina3d glue: per-connection routing, so ns-3 forwards every packet on the path the
 * ina3d replayer uses for the same (source, destination) pair.
 */
#ifndef INA3D_PAIR_ROUTING_H
#define INA3D_PAIR_ROUTING_H

#include "ns3/ipv4-routing-protocol.h"
#include "ns3/ipv4.h"

#include <map>
#include <memory>
#include <utility>

namespace ns3
{

/**
 * \brief Source-and-destination routing from a table computed outside ns-3.
 *
 * ECMP fabrics hash a connection's 5-tuple, so all packets of one (source host,
 * destination host) connection follow one path, and the reverse direction (TCP ACKs)
 * follows its own. This protocol reproduces exactly the paths ina3d chose: each node holds
 * one entry per (source node, destination node) pair whose path crosses it, giving the
 * output interface and the neighbour's address. Addresses are mapped to node ids with a
 * map shared by all nodes, so any interface address of a node identifies it.
 *
 * A packet addressed to one of the node's own addresses is delivered locally; a packet
 * of a pair without an entry is dropped (RouteInput returns false, RouteOutput returns no
 * route with ERROR_NOROUTETOHOST) and counted in GetMisses(), so a missing route shows
 * as an incomplete run, never as a silently different path.
 */
class Ina3dPairRouting : public Ipv4RoutingProtocol
{
  public:
    /** Address (host byte order) -> node id. */
    typedef std::map<uint32_t, uint32_t> AddressMap;

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Ina3dPairRouting();
    ~Ina3dPairRouting() override;

    /**
     * \brief Set the address -> node map used to read packet headers.
     * \param map shared by every node's instance
     */
    void SetAddressMap(std::shared_ptr<const AddressMap> map);

    /**
     * \brief Forward packets of the pair (src, dst) out of interface `interface` to `gateway`.
     * \return false if the pair already has an entry on this node (a path may not revisit a node)
     */
    bool AddPairRoute(uint32_t src, uint32_t dst, uint32_t interface, Ipv4Address gateway);

    /**
     * \brief The output interface of this node for packets of the pair (src, dst).
     * \return false when the pair has no entry here
     */
    bool LookupPair(uint32_t src, uint32_t dst, uint32_t& interface) const;

    /** \return the number of (src, dst) entries of this node */
    uint32_t GetNRoutes() const;

    /** \return packets dropped by any node for want of an entry, since the start */
    static uint64_t GetMisses();

    // Inherited from Ipv4RoutingProtocol
    Ptr<Ipv4Route> RouteOutput(Ptr<Packet> p,
                               const Ipv4Header& header,
                               Ptr<NetDevice> oif,
                               Socket::SocketErrno& sockerr) override;
    bool RouteInput(Ptr<const Packet> p,
                    const Ipv4Header& header,
                    Ptr<const NetDevice> idev,
                    UnicastForwardCallback ucb,
                    MulticastForwardCallback mcb,
                    LocalDeliverCallback lcb,
                    ErrorCallback ecb) override;
    void NotifyInterfaceUp(uint32_t interface) override;
    void NotifyInterfaceDown(uint32_t interface) override;
    void NotifyAddAddress(uint32_t interface, Ipv4InterfaceAddress address) override;
    void NotifyRemoveAddress(uint32_t interface, Ipv4InterfaceAddress address) override;
    void SetIpv4(Ptr<Ipv4> ipv4) override;
    void PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit unit = Time::S) const override;

  protected:
    void DoDispose() override;

  private:
    /** One table entry: where packets of a pair leave this node. */
    struct Hop
    {
        uint32_t interface;  //!< output interface index
        Ipv4Address gateway; //!< the neighbour's address on that link
    };

    /** Node of `a`, false when no node owns it. */
    bool NodeOf(Ipv4Address a, uint32_t& node) const;
    /** The route for `hop`, towards `dst`. */
    Ptr<Ipv4Route> MakeRoute(const Hop& hop, Ipv4Address dst) const;
    /** Count a miss; the first one is reported on stderr with the pair and the node. */
    void Miss(uint32_t src, uint32_t dst, const char* where) const;

    Ptr<Ipv4> m_ipv4;                              //!< this node's IPv4 stack
    std::shared_ptr<const AddressMap> m_addresses; //!< address -> node, all nodes
    std::map<std::pair<uint32_t, uint32_t>, Hop> m_table; //!< (src node, dst node) -> hop
    static uint64_t s_misses;                      //!< drops for want of an entry
};

} // namespace ns3

#endif
