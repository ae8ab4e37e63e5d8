/*
 * ina3d glue: RoCE-like queue pairs with DCQCN (see ina3d-roce.h).
 */
#include "ina3d-roce.h"

#include "ina3d-dag.h"
#include "ina3d-pair-routing.h"

#include <iostream>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Ina3dRoce");
NS_OBJECT_ENSURE_REGISTERED(RoceHeader);
NS_OBJECT_ENSURE_REGISTERED(Ina3dRoceApplication);

// ---------------------------------------------------------------- header

TypeId
RoceHeader::GetTypeId()
{
    static TypeId tid = TypeId("ns3::RoceHeader")
                            .SetParent<Header>()
                            .SetGroupName("Applications")
                            .AddConstructor<RoceHeader>();
    return tid;
}

TypeId
RoceHeader::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
RoceHeader::GetSerializedSize() const
{
    return 18;
}

void
RoceHeader::Serialize(Buffer::Iterator i) const
{
    i.WriteU8(m_opcode);
    i.WriteU8(0);
    i.WriteHtonU32(m_psn);
    i.WriteHtonU32(m_len);
    i.WriteHtonU32(m_src);
    i.WriteHtonU32(m_dst);
}

uint32_t
RoceHeader::Deserialize(Buffer::Iterator i)
{
    m_opcode = i.ReadU8();
    i.ReadU8();
    m_psn = i.ReadNtohU32();
    m_len = i.ReadNtohU32();
    m_src = i.ReadNtohU32();
    m_dst = i.ReadNtohU32();
    return 18;
}

void
RoceHeader::Print(std::ostream& os) const
{
    os << (m_opcode == DATA ? "DATA" : "CNP") << " psn=" << m_psn << " len=" << m_len << " "
       << m_src << "->" << m_dst;
}

// ---------------------------------------------------------------- application

/**
 * Where a RoCE packet goes: the peer's port 4791, ECT(0) (UDP's SendTo takes the TOS from
 * the address): ECN-capable, so switches mark it instead of dropping it early.
 */
static InetSocketAddress
RoceAddress(Ipv4Address to)
{
    InetSocketAddress a(to, ROCE_PORT);
    a.SetTos(0x02);
    return a;
}

TypeId
Ina3dRoceApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::Ina3dRoceApplication")
            .SetParent<Application>()
            .SetGroupName("Applications")
            .AddConstructor<Ina3dRoceApplication>()
            .AddAttribute("EwmaGain", "DCQCN g: alpha's EWMA gain (EWMA_GAIN).",
                          DoubleValue(0.00390625),
                          MakeDoubleAccessor(&Ina3dRoceApplication::m_ewmaGain),
                          MakeDoubleChecker<double>(0, 1))
            .AddAttribute("AlphaResumeInterval",
                          "Alpha update period (ALPHA_RESUME_INTERVAL).",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&Ina3dRoceApplication::m_alphaResume),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RateDecreaseInterval",
                          "Rate-decrease check period (RATE_DECREASE_INTERVAL).",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&Ina3dRoceApplication::m_rateDecrease),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RpTimer", "Rate-increase timer period (RP_TIMER).",
                          TimeValue(MicroSeconds(900)),
                          MakeTimeAccessor(&Ina3dRoceApplication::m_rpTimer),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("FastRecoveryTimes",
                          "Increase events spent in fast recovery (FAST_RECOVERY_TIMES).",
                          UintegerValue(1),
                          MakeUintegerAccessor(&Ina3dRoceApplication::m_fastRecovery),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("RateAi", "Additive increase step (RATE_AI).",
                          DataRateValue(DataRate("50Mb/s")),
                          MakeDataRateAccessor(&Ina3dRoceApplication::m_rateAi),
                          MakeDataRateChecker())
            .AddAttribute("RateHai", "Hyper increase step (RATE_HAI).",
                          DataRateValue(DataRate("100Mb/s")),
                          MakeDataRateAccessor(&Ina3dRoceApplication::m_rateHai),
                          MakeDataRateChecker())
            .AddAttribute("MinRate", "Lowest rate a cut may reach (MIN_RATE).",
                          DataRateValue(DataRate("100Mb/s")),
                          MakeDataRateAccessor(&Ina3dRoceApplication::m_minRate),
                          MakeDataRateChecker())
            .AddAttribute("ClampTargetRate",
                          "Set the target to the rate at every cut (CLAMP_TARGET_RATE).",
                          BooleanValue(false),
                          MakeBooleanAccessor(&Ina3dRoceApplication::m_clampTarget),
                          MakeBooleanChecker())
            .AddAttribute("ByteCounter",
                          "Bytes per byte-counter increase event, 0 = off (RP_BYTE_COUNTER).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&Ina3dRoceApplication::m_byteCounter),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("CnpInterval",
                          "A receiver sends at most one CNP per queue pair per interval.",
                          TimeValue(MicroSeconds(50)),
                          MakeTimeAccessor(&Ina3dRoceApplication::m_cnpInterval),
                          MakeTimeChecker())
            .AddAttribute("Payload", "Payload bytes per data packet.", UintegerValue(1000),
                          MakeUintegerAccessor(&Ina3dRoceApplication::m_payload),
                          MakeUintegerChecker<uint32_t>(1))
            .AddTraceSource("RateChange",
                            "A queue pair's DCQCN rate changed.",
                            MakeTraceSourceAccessor(&Ina3dRoceApplication::m_rateTrace),
                            "ns3::Ina3dRoceApplication::RateChangeCallback")
            .AddTraceSource("CnpSent",
                            "This host (receiver) sent a CNP to the given sender.",
                            MakeTraceSourceAccessor(&Ina3dRoceApplication::m_cnpSentTrace),
                            "ns3::TracedValueCallback::Uint32");
    return tid;
}

Ina3dRoceApplication::Ina3dRoceApplication() = default;
Ina3dRoceApplication::~Ina3dRoceApplication() = default;

void
Ina3dRoceApplication::StartApplication()
{
    m_node = GetNode()->GetId();
    m_cc.ewmaGain = m_ewmaGain;
    m_cc.alphaResumeNs = m_alphaResume.GetNanoSeconds();
    m_cc.rateDecreaseNs = m_rateDecrease.GetNanoSeconds();
    m_cc.rpTimerNs = m_rpTimer.GetNanoSeconds();
    m_cc.fastRecoveryTimes = m_fastRecovery;
    m_cc.rateAiBps = m_rateAi.GetBitRate();
    m_cc.rateHaiBps = m_rateHai.GetBitRate();
    m_cc.minRateBps = m_minRate.GetBitRate();
    m_cc.clampTargetRate = m_clampTarget;
    m_cc.byteCounter = m_byteCounter;
    m_cc.cnpIntervalNs = m_cnpInterval.GetNanoSeconds();
    m_socket = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
    // Bound to the host's identity address, not the any-address, so that the CNPs it
    // sends are routed with their UDP header on (Ina3dPairRouting reads their channel).
    m_socket->Bind(InetSocketAddress(Dag::Get().nodeAddress[m_node], ROCE_PORT));
    m_socket->SetIpRecvTos(true);
    m_socket->SetRecvCallback(MakeCallback(&Ina3dRoceApplication::HandleRead, this));
    if (Ptr<Ina3dPairRouting> routing = Routing())
        routing->SetRelayHook([this](uint32_t interface, uint32_t src, uint32_t dst,
                                     uint32_t channel, std::function<void()> send) {
            Relay(interface, src, dst, channel, std::move(send));
        });
}

void
Ina3dRoceApplication::StopApplication()
{
    if (m_socket)
        m_socket->Close();
    if (Ptr<Ina3dPairRouting> routing = Routing())
        routing->SetRelayHook(nullptr);
    for (auto& [c, s] : m_channels)
        s->Close();
    for (auto& [key, q] : m_qps)
        Simulator::Cancel(q.ccEvent);
    for (auto& [i, n] : m_nics)
    {
        Simulator::Cancel(n.wake);
        Simulator::Cancel(n.dequeued);
    }
}

Ptr<Ina3dPairRouting>
Ina3dRoceApplication::Routing() const
{
    return DynamicCast<Ina3dPairRouting>(GetNode()->GetObject<Ipv4>()->GetRoutingProtocol());
}

Ina3dRoceApplication::Nic&
Ina3dRoceApplication::GetNic(uint32_t interface)
{
    auto it = m_nics.find(interface);
    if (it != m_nics.end())
        return it->second;
    Nic& n = m_nics[interface];
    Ptr<Ipv4> ip = GetNode()->GetObject<Ipv4>();
    n.dev = DynamicCast<PointToPointNetDevice>(ip->GetNetDevice(interface));
    NS_ABORT_MSG_IF(!n.dev, "node " << m_node << ": interface " << interface << " is not point-to-point");
    n.queue = n.dev->GetQueue();
    DataRateValue rate;
    n.dev->GetAttribute("DataRate", rate);
    n.rate = rate.Get();
    n.queue->TraceConnectWithoutContext(
        "Dequeue", MakeBoundCallback(&Ina3dRoceApplication::Dequeued, this, interface));
    return n;
}

Ptr<Socket>
Ina3dRoceApplication::ChannelSocket(uint32_t channel)
{
    auto it = m_channels.find(channel);
    if (it != m_channels.end())
        return it->second;
    Ptr<Socket> s = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
    // an ephemeral port of the identity address; the fabric learns its channel before the
    // first packet leaves
    s->Bind(InetSocketAddress(Dag::Get().nodeAddress[m_node], 0));
    Address local;
    s->GetSockName(local);
    Ina3dPairRouting::RegisterPort(m_node, InetSocketAddress::ConvertFrom(local).GetPort(), channel);
    s->SetRecvCallback(MakeCallback(&Ina3dRoceApplication::HandleRead, this));
    m_channels[channel] = s;
    return s;
}

Ina3dRoceApplication::Qp&
Ina3dRoceApplication::GetQp(uint32_t dst, uint32_t channel)
{
    QpKey key{dst, channel};
    auto it = m_qps.find(key);
    if (it != m_qps.end())
        return it->second;
    Dag& dag = Dag::Get();
    Qp& q = m_qps[key];
    q.dst = dst;
    q.channel = channel;
    q.addr = dag.nodeAddress[dst];
    ChannelSocket(channel);
    Ptr<Ina3dPairRouting> routing = Routing();
    if (!routing || !routing->LookupPair(m_node, dst, channel, q.nic))
    {
        // no route: the send below is refused by routing, which reports the connection
        q.nic = 1;
    }
    Nic& n = GetNic(q.nic);
    n.qps.push_back(key);
    q.rp = DcqcnRp(m_cc, n.rate.GetBitRate());
    q.nextAvail = Simulator::Now();
    return q;
}

void
Ina3dRoceApplication::StartFlow(uint32_t idx)
{
    Dag& dag = Dag::Get();
    const DagRecord& r = dag.records[idx];
    // the receiver splits the connection's byte stream back into records in this order
    dag.pairFifo[{m_node, r.dst, r.channel}].push_back(idx);
    Qp& q = GetQp(r.dst, r.channel);
    q.queue.emplace_back(idx, r.bytes);
    Pump(q.nic);
}

void
Ina3dRoceApplication::Dequeued(Ina3dRoceApplication* app, uint32_t interface, Ptr<const Packet>)
{
    // Deferred to an event of its own, as ns-3's own flow control defers a queue disc's
    // wake-up (NetDeviceQueue::Wake schedules it): PointToPointNetDevice::TransmitComplete
    // dequeues the waiting packet while the device is already READY and starts it only
    // after the Dequeue trace returns. A packet sent from inside the trace would start
    // first, and the device would then start the dequeued one as well: two transmissions
    // at once (the NIC at twice its rate from then on), the later packet of a queue pair
    // arriving before the earlier one.
    Nic& n = app->GetNic(interface);
    if (!n.dequeued.IsRunning())
        n.dequeued = Simulator::ScheduleNow(&Ina3dRoceApplication::Wake, app, interface);
}

void
Ina3dRoceApplication::Wake(uint32_t interface)
{
    Pump(interface);
}

void
Ina3dRoceApplication::Pump(uint32_t interface)
{
    Nic& n = GetNic(interface);
    if (n.pumping)
    {
        n.again = true; // a send made the device dequeue: loop once more
        return;
    }
    n.pumping = true;
    Time now = Simulator::Now();
    do
    {
        n.again = false;
        // One packet waits behind the one on the wire: the NIC never idles while a queue
        // pair has a packet due, and never holds more than one of them.
        while (n.queue->GetNPackets() == 0 && SendNext(n, now))
        {
        }
    } while (n.again);
    n.pumping = false;
    // the next packet due, if the NIC is waiting for pacing
    Time next = Time::Max();
    for (const QpKey& k : n.qps)
    {
        const Qp& q = m_qps[k];
        if (!q.queue.empty())
            next = std::min(next, q.nextAvail);
    }
    if (next != Time::Max() && next > now && n.queue->GetNPackets() == 0)
    {
        if (!n.wake.IsRunning() || Time(n.wake.GetTs()) != next)
        {
            Simulator::Cancel(n.wake);
            n.wake = Simulator::Schedule(next - now, &Ina3dRoceApplication::Wake, this, interface);
        }
    }
}

bool
Ina3dRoceApplication::SendNext(Nic& n, Time now)
{
    size_t total = n.qps.size() + n.relays.size();
    for (size_t k = 0; k < total; k++)
    {
        size_t i = (n.next + k) % total;
        if (i < n.qps.size())
        {
            Qp& q = m_qps[n.qps[i]];
            if (q.queue.empty() || q.nextAvail > now)
                continue;
            n.next = (i + 1) % total;
            SendData(q);
            return true;
        }
        auto& waiting = n.relayed[n.relays[i - n.qps.size()]];
        if (waiting.empty())
            continue;
        n.next = (i + 1) % total;
        std::function<void()> send = std::move(waiting.front());
        waiting.pop_front();
        send();
        return true;
    }
    return false;
}

void
Ina3dRoceApplication::Relay(uint32_t interface,
                            uint32_t src,
                            uint32_t dst,
                            uint32_t channel,
                            std::function<void()> send)
{
    Nic& n = GetNic(interface);
    RelayKey key{src, dst, channel};
    auto [it, first] = n.relayed.try_emplace(key);
    if (first)
        n.relays.push_back(key);
    it->second.push_back(std::move(send));
    Pump(interface);
}

void
Ina3dRoceApplication::SendData(Qp& q)
{
    uint64_t& left = q.queue.front().second;
    uint32_t payload = uint32_t(std::min<uint64_t>(left, m_payload));
    RoceHeader h;
    h.m_opcode = RoceHeader::DATA;
    h.m_psn = q.psn++;
    h.m_len = payload;
    h.m_src = m_node;
    h.m_dst = q.dst;
    Ptr<Packet> p = Create<Packet>(payload);
    p->AddHeader(h);
    left -= payload;
    if (left == 0)
        q.queue.pop_front();
    // wire bytes: payload, this header, UDP, IPv4, PPP
    q.lastWire = payload + 18 + 8 + 20 + 2;
    Time now = Simulator::Now();
    q.nextAvail = now + DataRate(q.rp.Rate()).CalculateBytesTxTime(q.lastWire);
    uint64_t old = q.rp.Rate();
    if (q.rp.OnSent(now.GetNanoSeconds(), q.lastWire))
        RateChanged(q, old);
    m_channels[q.channel]->SendTo(p, 0, RoceAddress(q.addr));
}

void
Ina3dRoceApplication::HandleRead(Ptr<Socket> s)
{
    Ptr<Packet> p;
    Address from;
    while ((p = s->RecvFrom(from)))
    {
        SocketIpTosTag tos;
        bool ce = p->RemovePacketTag(tos) && (tos.GetTos() & 0x3) == 0x3;
        RoceHeader h;
        if (p->GetSize() < h.GetSerializedSize())
        {
            Dag::Get().protocolErrors++;
            continue;
        }
        p->RemoveHeader(h);
        // the connection: data comes from the sender's channel port, a CNP comes back to
        // this host's channel port
        uint16_t port = InetSocketAddress::ConvertFrom(from).GetPort();
        uint32_t channel = Ina3dPairRouting::PortChannel(h.m_src, port);
        if (h.m_opcode == RoceHeader::CNP)
        {
            Address local;
            s->GetSockName(local);
            channel = Ina3dPairRouting::PortChannel(m_node, InetSocketAddress::ConvertFrom(local).GetPort());
        }
        Receive(h, ce, channel, port);
    }
}

void
Ina3dRoceApplication::Receive(const RoceHeader& h, bool ce, uint32_t channel, uint16_t fromPort)
{
    Dag& dag = Dag::Get();
    Time now = Simulator::Now();
    if (h.m_opcode == RoceHeader::CNP)
    {
        auto it = m_qps.find({h.m_src, channel});
        if (it == m_qps.end())
        {
            dag.protocolErrors++;
            return;
        }
        m_cnpsReceived++;
        Qp& q = it->second;
        q.rp.OnCnp(now.GetNanoSeconds());
        ScheduleCc(q);
        return;
    }
    Rx& rx = m_rx[{h.m_src, channel}];
    if (h.m_psn != rx.expected)
    {
        if (dag.protocolErrors++ == 0)
            std::cerr << "RoCE: node " << m_node << " got packet " << h.m_psn << " from node "
                      << h.m_src << " on channel " << channel << ", expected " << rx.expected
                      << ": a packet was lost or reordered (the glue assumes a lossless network)"
                      << std::endl;
        return;
    }
    rx.expected++;
    if (ce && (rx.lastCnp < Seconds(0) || now - rx.lastCnp >= m_cnpInterval))
    {
        // notification point: one CNP per queue pair per interval
        rx.lastCnp = now;
        RoceHeader c;
        c.m_opcode = RoceHeader::CNP;
        c.m_src = m_node;
        c.m_dst = h.m_src;
        Ptr<Packet> p = Create<Packet>(0);
        p->AddHeader(c);
        // back to the sending queue pair's port: the CNP travels on the channel's reverse path
        InetSocketAddress to(dag.nodeAddress[h.m_src], fromPort);
        to.SetTos(0x02);
        m_socket->SendTo(p, 0, to);
        m_cnpsSent++;
        m_cnpSentTrace(h.m_src);
    }
    dag.Deliver(h.m_src, m_node, channel, h.m_len);
}

void
Ina3dRoceApplication::ScheduleCc(Qp& q)
{
    int64_t t = q.rp.NextEvent();
    Simulator::Cancel(q.ccEvent);
    if (t < 0)
        return;
    int64_t now = Simulator::Now().GetNanoSeconds();
    q.ccEvent = Simulator::Schedule(NanoSeconds(std::max<int64_t>(0, t - now)),
                                    &Ina3dRoceApplication::CcTimer, this, QpKey{q.dst, q.channel});
}

void
Ina3dRoceApplication::CcTimer(QpKey key)
{
    Qp& q = m_qps[key];
    uint64_t old = q.rp.Rate();
    if (q.rp.Advance(Simulator::Now().GetNanoSeconds()))
        RateChanged(q, old);
    ScheduleCc(q);
}

void
Ina3dRoceApplication::RateChanged(Qp& q, uint64_t old)
{
    // as HPCC's ns-3: the packet already paced at the old rate is re-paced at the new one
    Time was = DataRate(old).CalculateBytesTxTime(q.lastWire);
    Time now = DataRate(q.rp.Rate()).CalculateBytesTxTime(q.lastWire);
    q.nextAvail = q.nextAvail + now - was;
    int64_t t = Simulator::Now().GetNanoSeconds();
    m_rateTrace(q.dst, q.rp.Rate(), q.rp.Target(), q.rp.Alpha(t), DcqcnEventName(q.rp.LastEvent()));
    Pump(q.nic);
}

} // namespace ns3
