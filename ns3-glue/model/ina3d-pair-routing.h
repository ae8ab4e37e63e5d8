/*
 * ina3d glue: per-connection routing, so ns-3 forwards every packet on the path the
 * ina3d replayer uses for the same connection: (source, destination, NCCL channel).
 */
#ifndef INA3D_PAIR_ROUTING_H
#define INA3D_PAIR_ROUTING_H

#include "ns3/ipv4-routing-protocol.h"
#include "ns3/ipv4.h"

#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

namespace ns3
{

/**
 * \brief Source-and-destination routing from a table computed outside ns-3.
 *
 * ECMP fabrics hash a connection's 5-tuple, so all packets of one connection follow one
 * path, and the reverse direction (TCP ACKs, CNPs) follows its own. NCCL opens one
 * connection per channel between two GPUs, so the channels of one (source host,
 * destination host) pair may take different paths. This protocol reproduces exactly the
 * paths ina3d chose: each node holds one entry per connection (source node, destination
 * node, channel) whose path crosses it, giving the output interface and the neighbour's
 * address. Addresses are mapped to node ids with a map shared by all nodes, so any
 * interface address of a node identifies it.
 *
 * The channel of a packet is read from its 5-tuple, as a fabric's hash reads it: the
 * applications register the local port of every channel connection they open
 * (RegisterPort), and a UDP or TCP packet whose (source node, source port) or
 * (destination node, destination port) is registered belongs to that channel; any other
 * packet (INA streams, which are one connection each) is channel 0. RouteInput reads the
 * ports at the start of the packet (the IPv4 header is already removed); RouteOutput reads
 * them when the transport header is already on the packet, which ns-3 guarantees for TCP
 * segments and for UDP sockets bound to one of the node's addresses (Ipv4L3Protocol::Send
 * routes them after UdpL4Protocol added its header); a socket bound to the any-address
 * asks before its header exists, and gets channel 0.
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
     * \brief Forward packets of channel `channel` of the pair (src, dst) out of interface
     * `interface` to `gateway`.
     * \return false if the connection already has an entry on this node (a path may not
     * revisit a node)
     */
    bool AddPairRoute(uint32_t src, uint32_t dst, uint32_t channel, uint32_t interface,
                      Ipv4Address gateway);

    /**
     * \brief The output interface of this node for packets of channel `channel` of the
     * pair (src, dst).
     * \return false when the connection has no entry here
     */
    bool LookupPair(uint32_t src, uint32_t dst, uint32_t channel, uint32_t& interface) const;

    /**
     * What a relaying host does with a packet it forwards: `send` puts it on the wire of
     * `interface` (IPv4 forwarding, as RouteInput would have done at once) whenever the
     * host's NIC scheduler picks connection (src, dst, channel).
     */
    typedef std::function<void(uint32_t interface, uint32_t src, uint32_t dst, uint32_t channel,
                               std::function<void()> send)>
        RelayHook;

    /**
     * \brief Hand the packets this node forwards to `hook` instead of the device queue.
     *
     * Set by a host's Ina3dRoceApplication: a relaying server's NIC serves the connections
     * it relays round robin with its own queue pairs (ina3d-roce.h), as the replayer's fair
     * share assumes. Without a hook (switches, TRANSPORT tcp) packets are forwarded at once.
     */
    void SetRelayHook(RelayHook hook);

    /** \return the number of (src, dst, channel) entries of this node */
    uint32_t GetNRoutes() const;

    /**
     * \brief Packets to or from port `port` of node `node` belong to NCCL channel
     * `channel` (an application opened that channel's connection on that port). Ports are
     * not told apart by protocol: a run carries net records over UDP (roce) or TCP, never
     * both, and INA's and the listeners' fixed ports are never registered.
     */
    static void RegisterPort(uint32_t node, uint16_t port, uint32_t channel);

    /** \return the channel registered for (node, port), or 0 when none is */
    static uint32_t PortChannel(uint32_t node, uint16_t port);

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
    /** Count a miss; the first one is reported on stderr with the connection and the node. */
    void Miss(uint32_t src, uint32_t dst, uint32_t channel, const char* where) const;
    /**
     * The channel of a packet of (src, dst) whose transport header starts `p`: the
     * registered channel of its source port at src, else of its destination port at dst,
     * else 0 (also when `p` carries no UDP or TCP header).
     */
    static uint32_t ChannelOf(Ptr<const Packet> p, uint8_t protocol, uint32_t src, uint32_t dst);

    Ptr<Ipv4> m_ipv4;                              //!< this node's IPv4 stack
    std::shared_ptr<const AddressMap> m_addresses; //!< address -> node, all nodes
    /** (src node, dst node, channel) -> hop */
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, Hop> m_table;
    RelayHook m_relay; //!< set on relaying hosts (SetRelayHook)
    static uint64_t s_misses; //!< drops for want of an entry
    /** (node, port) -> channel of the connection on that port, every node */
    static std::map<std::pair<uint32_t, uint16_t>, uint32_t> s_portChannel;
};

} // namespace ns3

#endif
