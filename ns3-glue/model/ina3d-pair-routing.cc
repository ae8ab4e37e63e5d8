#include "ina3d-pair-routing.h"

#include "ns3/ipv4-route.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/udp-l4-protocol.h"
#include "ns3/log.h"
#include "ns3/node.h"
#include "ns3/output-stream-wrapper.h"
#include "ns3/simulator.h"

#include <iostream>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Ina3dPairRouting");
NS_OBJECT_ENSURE_REGISTERED(Ina3dPairRouting);

uint64_t Ina3dPairRouting::s_misses = 0;
std::map<std::pair<uint32_t, uint16_t>, uint32_t> Ina3dPairRouting::s_portChannel;

TypeId
Ina3dPairRouting::GetTypeId()
{
    static TypeId tid = TypeId("ns3::Ina3dPairRouting")
                            .SetParent<Ipv4RoutingProtocol>()
                            .SetGroupName("Internet")
                            .AddConstructor<Ina3dPairRouting>();
    return tid;
}

Ina3dPairRouting::Ina3dPairRouting()
{
    NS_LOG_FUNCTION(this);
}

Ina3dPairRouting::~Ina3dPairRouting()
{
    NS_LOG_FUNCTION(this);
}

void
Ina3dPairRouting::DoDispose()
{
    m_ipv4 = nullptr;
    m_table.clear();
    m_addresses.reset();
    Ipv4RoutingProtocol::DoDispose();
}

void
Ina3dPairRouting::SetAddressMap(std::shared_ptr<const AddressMap> map)
{
    m_addresses = std::move(map);
}

bool
Ina3dPairRouting::AddPairRoute(uint32_t src, uint32_t dst, uint32_t channel, uint32_t interface,
                               Ipv4Address gateway)
{
    NS_LOG_FUNCTION(this << src << dst << channel << interface << gateway);
    return m_table.emplace(std::make_tuple(src, dst, channel), Hop{interface, gateway}).second;
}

bool
Ina3dPairRouting::LookupPair(uint32_t src, uint32_t dst, uint32_t channel, uint32_t& interface) const
{
    auto it = m_table.find({src, dst, channel});
    if (it == m_table.end())
        return false;
    interface = it->second.interface;
    return true;
}

uint32_t
Ina3dPairRouting::GetNRoutes() const
{
    return m_table.size();
}

uint64_t
Ina3dPairRouting::GetMisses()
{
    return s_misses;
}

void
Ina3dPairRouting::RegisterPort(uint32_t node, uint16_t port, uint32_t channel)
{
    NS_LOG_FUNCTION(node << port << channel);
    s_portChannel[{node, port}] = channel;
}

uint32_t
Ina3dPairRouting::PortChannel(uint32_t node, uint16_t port)
{
    auto it = s_portChannel.find({node, port});
    return it == s_portChannel.end() ? 0 : it->second;
}

uint32_t
Ina3dPairRouting::ChannelOf(Ptr<const Packet> p, uint8_t protocol, uint32_t src, uint32_t dst)
{
    // UDP and TCP both begin with the source and destination ports, 16 bits each
    if (!p || p->GetSize() < 4 ||
        (protocol != UdpL4Protocol::PROT_NUMBER && protocol != TcpL4Protocol::PROT_NUMBER))
        return 0;
    uint8_t b[4];
    p->CopyData(b, 4);
    uint16_t sport = uint16_t(b[0] << 8 | b[1]);
    uint16_t dport = uint16_t(b[2] << 8 | b[3]);
    auto it = s_portChannel.find({src, sport});
    if (it == s_portChannel.end())
        it = s_portChannel.find({dst, dport});
    return it == s_portChannel.end() ? 0 : it->second;
}

bool
Ina3dPairRouting::NodeOf(Ipv4Address a, uint32_t& node) const
{
    if (!m_addresses)
        return false;
    auto it = m_addresses->find(a.Get());
    if (it == m_addresses->end())
        return false;
    node = it->second;
    return true;
}

Ptr<Ipv4Route>
Ina3dPairRouting::MakeRoute(const Hop& hop, Ipv4Address dst) const
{
    Ptr<Ipv4Route> r = Create<Ipv4Route>();
    r->SetDestination(dst);
    r->SetGateway(hop.gateway);
    r->SetOutputDevice(m_ipv4->GetNetDevice(hop.interface));
    r->SetSource(m_ipv4->GetAddress(hop.interface, 0).GetLocal());
    return r;
}

void
Ina3dPairRouting::Miss(uint32_t src, uint32_t dst, uint32_t channel, const char* where) const
{
    if (s_misses++ == 0)
        std::cerr << "ina3d-ns3: node " << m_ipv4->GetObject<Node>()->GetId()
                  << " has no route for packets from node " << src << " to node " << dst
                  << " on channel " << channel << " (" << where
                  << "); routes.txt lacks this connection" << std::endl;
}

Ptr<Ipv4Route>
Ina3dPairRouting::RouteOutput(Ptr<Packet> p,
                              const Ipv4Header& header,
                              Ptr<NetDevice> oif,
                              Socket::SocketErrno& sockerr)
{
    NS_LOG_FUNCTION(this << p << header.GetDestination() << oif);
    // Locally originated: the pair's source is this node, whatever address the socket
    // bound (sockets bound to any address ask before choosing one).
    uint32_t self = m_ipv4->GetObject<Node>()->GetId();
    uint32_t dst;
    if (!NodeOf(header.GetDestination(), dst))
    {
        sockerr = Socket::ERROR_NOROUTETOHOST;
        return nullptr;
    }
    // The transport header is on the packet when the source is already one of this node's
    // addresses (TCP segments, UDP sockets bound to an address); otherwise channel 0.
    bool framed = p && m_ipv4->GetInterfaceForAddress(header.GetSource()) >= 0;
    uint32_t channel = framed ? ChannelOf(p, header.GetProtocol(), self, dst) : 0;
    auto it = m_table.find({self, dst, channel});
    if (it == m_table.end())
    {
        Miss(self, dst, channel, "RouteOutput");
        sockerr = Socket::ERROR_NOROUTETOHOST;
        return nullptr;
    }
    sockerr = Socket::ERROR_NOTERROR;
    return MakeRoute(it->second, header.GetDestination());
}

bool
Ina3dPairRouting::RouteInput(Ptr<const Packet> p,
                             const Ipv4Header& header,
                             Ptr<const NetDevice> idev,
                             UnicastForwardCallback ucb,
                             MulticastForwardCallback mcb,
                             LocalDeliverCallback lcb,
                             ErrorCallback ecb)
{
    NS_LOG_FUNCTION(this << p << header << idev);
    NS_ASSERT(m_ipv4->GetInterfaceForDevice(idev) >= 0);
    uint32_t iif = m_ipv4->GetInterfaceForDevice(idev);
    if (m_ipv4->IsDestinationAddress(header.GetDestination(), iif))
    {
        if (lcb.IsNull())
            return false;
        lcb(p, header, iif);
        return true;
    }
    uint32_t src, dst;
    if (!NodeOf(header.GetSource(), src) || !NodeOf(header.GetDestination(), dst))
        return false; // not a packet of the emitted network (e.g. broadcast): not ours
    uint32_t channel = ChannelOf(p, header.GetProtocol(), src, dst);
    auto it = m_table.find({src, dst, channel});
    if (it == m_table.end() || !m_ipv4->IsForwarding(iif))
    {
        Miss(src, dst, channel, "RouteInput");
        return false; // Ipv4L3Protocol drops it with DROP_NO_ROUTE
    }
    Ptr<Ipv4Route> route = MakeRoute(it->second, header.GetDestination());
    if (m_relay)
    {
        // a relaying host: its NIC scheduler decides when the packet leaves
        m_relay(it->second.interface, src, dst, channel, [ucb, route, p, header]() {
            ucb(route, p, header);
        });
        return true;
    }
    ucb(route, p, header);
    return true;
}

void
Ina3dPairRouting::SetRelayHook(RelayHook hook)
{
    m_relay = std::move(hook);
}

void
Ina3dPairRouting::NotifyInterfaceUp(uint32_t)
{
}

void
Ina3dPairRouting::NotifyInterfaceDown(uint32_t)
{
}

void
Ina3dPairRouting::NotifyAddAddress(uint32_t, Ipv4InterfaceAddress)
{
}

void
Ina3dPairRouting::NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress)
{
}

void
Ina3dPairRouting::SetIpv4(Ptr<Ipv4> ipv4)
{
    NS_ASSERT(!m_ipv4 && ipv4);
    m_ipv4 = ipv4;
}

void
Ina3dPairRouting::PrintRoutingTable(Ptr<OutputStreamWrapper> stream, Time::Unit unit) const
{
    std::ostream& os = *stream->GetStream();
    os << "Node: " << m_ipv4->GetObject<Node>()->GetId() << ", Time: " << Simulator::Now().As(unit)
       << ", Ina3dPairRouting table (" << m_table.size() << " connections)\n"
       << "SrcNode\tDstNode\tChannel\tGateway\t\tIface\n";
    for (const auto& [conn, hop] : m_table)
        os << std::get<0>(conn) << "\t" << std::get<1>(conn) << "\t" << std::get<2>(conn) << "\t"
           << hop.gateway << "\t" << hop.interface << "\n";
    os << std::endl;
}

} // namespace ns3
