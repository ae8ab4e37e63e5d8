/*
 * ina3d glue: the host and switch applications.
 */
#include "ina-apps.h"

#include "ina3d-pair-routing.h"

#include <algorithm>
#include <cstring>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Ina3dApps");
NS_OBJECT_ENSURE_REGISTERED(InaHostApplication);
NS_OBJECT_ENSURE_REGISTERED(InaSwitchApplication);

NS_OBJECT_ENSURE_REGISTERED(InaTag);

TypeId
InaTag::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::InaTag").SetParent<Tag>().SetGroupName("Applications").AddConstructor<InaTag>();
    return tid;
}

TypeId
InaTag::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
InaTag::GetSerializedSize() const
{
    return sizeof(InaWire);
}

void
InaTag::Serialize(TagBuffer i) const
{
    i.Write(reinterpret_cast<const uint8_t*>(&wire), sizeof(InaWire));
}

void
InaTag::Deserialize(TagBuffer i)
{
    i.Read(reinterpret_cast<uint8_t*>(&wire), sizeof(InaWire));
}

void
InaTag::Print(std::ostream& os) const
{
    os << "ina type=" << wire.type << " agg=" << wire.agg << " seq=" << wire.seq;
}

void
InaSend(Ptr<Socket> sock, const InaWire& w, Ipv4Address to)
{
    Ptr<Packet> p = Create<Packet>(INA_HEADER_BYTES + w.len);
    InaTag tag;
    tag.wire = w;
    p->AddPacketTag(tag);
    // UDP's SendTo takes the TOS from the address, not from the socket
    InetSocketAddress dst(to, INA_PORT);
    dst.SetTos(INA_ECT0);
    sock->SendTo(p, 0, dst);
}

static bool
ReadWire(Ptr<Packet> p, InaWire& w)
{
    InaTag tag;
    if (!p->PeekPacketTag(tag) || p->GetSize() != INA_HEADER_BYTES + tag.wire.len)
        return false;
    w = tag.wire;
    return true;
}

// ---------------------------------------------------------------- host

TypeId
InaHostApplication::GetTypeId()
{
    static TypeId tid = TypeId("ns3::InaHostApplication")
                            .SetParent<Application>()
                            .SetGroupName("Applications")
                            .AddConstructor<InaHostApplication>();
    return tid;
}

InaHostApplication::InaHostApplication() = default;
InaHostApplication::~InaHostApplication() = default;

void
InaHostApplication::StartApplication()
{
    m_node = GetNode()->GetId();
    m_listen = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
    m_listen->Bind(InetSocketAddress(Ipv4Address::GetAny(), FLOW_PORT));
    m_listen->Listen();
    m_listen->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                MakeCallback(&InaHostApplication::HandleAccept, this));
    m_udp = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
    m_udp->Bind(InetSocketAddress(Ipv4Address::GetAny(), INA_PORT));
    m_udp->SetRecvCallback(MakeCallback(&InaHostApplication::HandleUdp, this));
}

void
InaHostApplication::StopApplication()
{
    if (m_listen)
        m_listen->Close();
    if (m_udp)
        m_udp->Close();
}

void
InaHostApplication::StartFlow(uint32_t idx)
{
    Dag& dag = Dag::Get();
    const DagRecord& r = dag.records[idx];
    if (dag.params.persistentTcp)
    {
        // Like NCCL's long-lived peer connections: one connection per (src, dst, channel),
        // records sent back to back in the order they start; the receiver splits the
        // byte stream back into records by their sizes.
        Conn& c = m_conns[{r.dst, r.channel}];
        dag.pairFifo[{m_node, r.dst, r.channel}].push_back(idx);
        c.queued += r.bytes;
        if (!c.sock)
        {
            c.sock = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
            BoundWindow(c.sock, r.dst, r.channel);
            BindChannel(c.sock, r.channel);
            m_connDst[c.sock] = {r.dst, r.channel};
            c.sock->SetConnectCallback(MakeCallback(&InaHostApplication::ConnectOk, this),
                                       MakeCallback(&InaHostApplication::ConnectFail, this));
            c.sock->SetSendCallback(MakeCallback(&InaHostApplication::HandleSend, this));
            c.sock->Connect(InetSocketAddress(dag.nodeAddress[r.dst], FLOW_PORT));
        }
        else if (c.connected)
            HandleSend(c.sock, c.sock->GetTxAvailable());
        return;
    }
    Ptr<Socket> s = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
    BoundWindow(s, r.dst, r.channel);
    uint16_t port = BindChannel(s, r.channel);
    dag.tcpFlowByPort[{m_node, port}] = idx;
    m_tx[s] = TxFlow{idx, 0};
    s->SetConnectCallback(MakeCallback(&InaHostApplication::ConnectOk, this),
                          MakeCallback(&InaHostApplication::ConnectFail, this));
    s->SetSendCallback(MakeCallback(&InaHostApplication::HandleSend, this));
    s->Connect(InetSocketAddress(dag.nodeAddress[r.dst], FLOW_PORT));
}

uint16_t
InaHostApplication::BindChannel(Ptr<Socket> s, uint32_t channel)
{
    // The node's identity address, so that the receiver's routes back (ACKs) exist; the
    // port tells the fabric (Ina3dPairRouting) which channel's path the connection takes.
    s->Bind(InetSocketAddress(Dag::Get().nodeAddress[m_node], 0));
    Address local;
    s->GetSockName(local);
    uint16_t port = InetSocketAddress::ConvertFrom(local).GetPort();
    Ina3dPairRouting::RegisterPort(m_node, port, channel);
    return port;
}

void
InaHostApplication::BoundWindow(Ptr<Socket> s, uint32_t dst, uint32_t channel)
{
    // The send buffer holds every unacknowledged segment, so it bounds the window: a few
    // of the path's bandwidth-delay products keep a lone connection at line rate, and keep
    // short the list of sent segments ns-3's TcpTxBuffer::NextSeg walks on every send.
    Dag& dag = Dag::Get();
    uint32_t seg = dag.params.tcpSegment;
    auto bdp = dag.pairBdp.find({m_node, dst, channel});
    uint64_t bytes = bdp == dag.pairBdp.end() ? dag.params.tcpBuffer
                                              : uint64_t(dag.params.tcpWindowBdps * double(bdp->second));
    uint64_t segs = std::max<uint64_t>(16, (bytes + seg - 1) / seg);
    s->SetAttribute("SndBufSize", UintegerValue(segs * seg));
    s->SetAttribute("InitialCwnd", UintegerValue(std::min<uint64_t>(segs, dag.params.tcpInitialCwnd)));
}

void
InaHostApplication::ConnectOk(Ptr<Socket> s)
{
    auto c = m_connDst.find(s);
    if (c != m_connDst.end())
        m_conns[c->second].connected = true;
    HandleSend(s, s->GetTxAvailable());
}

void
InaHostApplication::ConnectFail(Ptr<Socket>)
{
    Dag::Get().protocolErrors++;
}

void
InaHostApplication::HandleSend(Ptr<Socket> s, uint32_t)
{
    auto pc = m_connDst.find(s);
    if (pc != m_connDst.end())
    {
        Conn& c = m_conns[pc->second];
        while (c.connected && c.sent < c.queued && s->GetTxAvailable() > 0)
        {
            uint64_t chunk = std::min<uint64_t>(c.queued - c.sent, s->GetTxAvailable());
            chunk = std::min<uint64_t>(chunk, 1 << 20);
            int sent = s->Send(Create<Packet>(chunk));
            if (sent <= 0)
                break;
            c.sent += sent;
        }
        return;
    }
    auto it = m_tx.find(s);
    if (it == m_tx.end())
        return;
    TxFlow& f = it->second;
    uint64_t total = Dag::Get().records[f.idx].bytes;
    while (f.sent < total && s->GetTxAvailable() > 0)
    {
        uint64_t chunk = std::min<uint64_t>(total - f.sent, s->GetTxAvailable());
        chunk = std::min<uint64_t>(chunk, 1 << 20);
        int sent = s->Send(Create<Packet>(chunk));
        if (sent <= 0)
            break;
        f.sent += sent;
    }
    if (f.sent >= total)
    {
        s->Close();
        m_tx.erase(it);
    }
}

void
InaHostApplication::HandleAccept(Ptr<Socket> s, const Address& from)
{
    Dag& dag = Dag::Get();
    InetSocketAddress a = InetSocketAddress::ConvertFrom(from);
    auto node = dag.nodeOfAddress.find(a.GetIpv4().Get());
    if (dag.params.persistentTcp)
    {
        if (node == dag.nodeOfAddress.end())
        {
            dag.protocolErrors++;
            return;
        }
        // the connection's channel: the one its source registered for its port
        m_rxPair[s] = {node->second, Ina3dPairRouting::PortChannel(node->second, a.GetPort())};
        s->SetRecvCallback(MakeCallback(&InaHostApplication::HandleRead, this));
        return;
    }
    auto flow = node == dag.nodeOfAddress.end()
                    ? dag.tcpFlowByPort.end()
                    : dag.tcpFlowByPort.find({node->second, a.GetPort()});
    if (flow == dag.tcpFlowByPort.end())
    {
        dag.protocolErrors++;
        return;
    }
    m_rx[s] = flow->second;
    s->SetRecvCallback(MakeCallback(&InaHostApplication::HandleRead, this));
}

void
InaHostApplication::HandleRead(Ptr<Socket> s)
{
    Dag& dag = Dag::Get();
    auto pr = m_rxPair.find(s);
    if (pr != m_rxPair.end())
    {
        Ptr<Packet> p;
        while ((p = s->Recv()) && p->GetSize() > 0)
            dag.Deliver(pr->second.first, m_node, pr->second.second, p->GetSize());
        return;
    }
    auto it = m_rx.find(s);
    if (it == m_rx.end())
        return;
    DagRecord& r = dag.records[it->second];
    Ptr<Packet> p;
    while ((p = s->Recv()) && p->GetSize() > 0)
        r.delivered += p->GetSize();
    if (r.delivered >= r.bytes && r.endNs < 0)
    {
        dag.Finish(it->second);
        s->Close();
        m_rx.erase(it);
    }
}

void
InaHostApplication::StartIna(uint32_t idx)
{
    Dag& dag = Dag::Get();
    const DagRecord& r = dag.records[idx];
    Worker& w = m_workers[r.aggId];
    w.upIdx = idx;
    AggInfo& a = dag.aggs[r.aggId];
    // The aggregation asks for its slots when all its workers are ready, as the replayer
    // starts an aggregation unit when all its edges are: nothing is summed before then.
    if (++a.workersStarted == a.workerUp.size())
        InaSlotAdmission::Get().Ask(r.aggId);
}

void
InaHostApplication::Admitted(uint64_t agg)
{
    // The up edge starts streaming now (the replayer starts every edge of a unit when it
    // is granted); the wait for slots is the record's wait beyond its gap.
    Dag& dag = Dag::Get();
    dag.records[m_workers[agg].upIdx].startNs = Simulator::Now().GetNanoSeconds();
    if (dag.aggs[agg].admission == Admission::Fallback)
        StartRing(agg);
    else
        PumpIna(agg);
}

/** Every record of `agg` (all its edges) ends now: its fallback ring is done. */
static void
FinishFallback(uint64_t agg)
{
    Dag& dag = Dag::Get();
    AggInfo& a = dag.aggs[agg];
    std::vector<uint32_t> edges;
    for (const auto& [sw, here] : a.switches)
    {
        edges.insert(edges.end(), here.childUp.begin(), here.childUp.end());
        edges.insert(edges.end(), here.down.begin(), here.down.end());
    }
    // Like the replayer's unit: every edge starts when the aggregation was answered and
    // ends with the ring, and carries its own bytes.
    for (uint32_t idx : edges)
    {
        DagRecord& r = dag.records[idx];
        r.startNs = a.askedNs;
        r.delivered = r.bytes;
    }
    for (uint32_t idx : edges)
        dag.Finish(idx);
}

void
InaHostApplication::StartRing(uint64_t agg)
{
    Dag& dag = Dag::Get();
    const AggInfo& a = dag.aggs[agg];
    auto me = std::find(a.ring.begin(), a.ring.end(), m_node);
    uint32_t n = a.ring.size();
    if (me == a.ring.end())
    {
        dag.protocolErrors++;
        return;
    }
    RingPart& p = m_rings[agg];
    p.succ = a.ring[(me - a.ring.begin() + 1) % n];
    p.steps = 2 * (n - 1);
    p.chunk = (a.bytes + n - 1) / n;
    uint32_t payload = dag.params.tcpSegment;
    p.perStep = uint32_t((p.chunk + payload - 1) / payload);
    // windowed as the glue's TCP connections are: two bandwidth-delay products of the
    // path to the successor (at least 16 packets)
    auto bdp = dag.pairBdp.find({m_node, p.succ, 0u});
    uint64_t bytes = bdp == dag.pairBdp.end() ? dag.params.tcpBuffer
                                              : uint64_t(dag.params.tcpWindowBdps * double(bdp->second));
    p.window = uint32_t(std::max<uint64_t>(16, (bytes + payload - 1) / payload));
    p.got.assign(p.steps, 0);
    if (p.steps == 0 || p.perStep == 0)
    {
        p.done = true;
        if (++dag.aggs[agg].ringsDone == n)
            FinishFallback(agg);
        return;
    }
    PumpRing(agg);
}

void
InaHostApplication::PumpRing(uint64_t agg)
{
    Dag& dag = Dag::Get();
    RingPart& p = m_rings[agg];
    uint32_t payload = dag.params.tcpSegment;
    while (p.step < p.steps && (p.step == 0 || p.got[p.step - 1] == p.perStep) &&
           p.sent - p.acked < p.window)
    {
        InaWire m{};
        m.type = InaWire::RING_DATA;
        m.from = m_node;
        m.agg = agg;
        m.step = p.step;
        m.seq = p.sentInStep;
        m.len = uint32_t(std::min<uint64_t>(payload, p.chunk - uint64_t(p.sentInStep) * payload));
        InaSend(m_udp, m, dag.nodeAddress[p.succ]);
        dag.fallbackPackets++;
        p.sent++;
        if (++p.sentInStep == p.perStep)
        {
            p.step++;
            p.sentInStep = 0;
        }
    }
}

void
InaHostApplication::OnRingData(const InaWire& w)
{
    Dag& dag = Dag::Get();
    auto it = m_rings.find(w.agg);
    if (it == m_rings.end() || w.step >= it->second.steps)
    {
        dag.protocolErrors++;
        return;
    }
    RingPart& p = it->second;
    InaWire ack = w;
    ack.type = InaWire::RING_ACK;
    ack.from = m_node;
    ack.len = 0;
    InaSend(m_udp, ack, dag.nodeAddress[w.from]);
    if (++p.got[w.step] > p.perStep)
    {
        dag.protocolErrors++;
        return;
    }
    if (w.step + 1 == p.steps && p.got[w.step] == p.perStep)
    {
        p.done = true;
        AggInfo& a = dag.aggs[w.agg];
        if (++a.ringsDone == a.ring.size())
            FinishFallback(w.agg);
    }
    PumpRing(w.agg);
}

void
InaHostApplication::OnRingAck(const InaWire& w)
{
    auto it = m_rings.find(w.agg);
    if (it == m_rings.end() || it->second.acked >= it->second.sent)
    {
        Dag::Get().protocolErrors++;
        return;
    }
    it->second.acked++;
    PumpRing(w.agg);
}

void
InaHostApplication::PumpIna(uint64_t agg)
{
    Dag& dag = Dag::Get();
    const AggInfo& a = dag.aggs[agg];
    Worker& w = m_workers[agg];
    const DagRecord& up = dag.records[w.upIdx];
    // The window counts slots whose result has not come back (SwitchML's client window):
    // the w slots granted on every switch of the tree, so that a sequence number always
    // finds a slot; an aggregation that fell back holds none and keeps INA_WINDOW.
    uint32_t window = a.admission == Admission::Granted    ? a.slots
                      : a.admission == Admission::Fallback ? dag.params.inaWindow
                                                           : 0;
    while (w.nextSeq < a.packets && w.nextSeq - w.results < window)
    {
        InaWire m{};
        m.type = InaWire::DATA;
        m.from = m_node;
        m.agg = agg;
        m.seq = w.nextSeq;
        m.len = std::min<uint64_t>(dag.params.inaPayload,
                                   a.bytes - uint64_t(w.nextSeq) * dag.params.inaPayload);
        m.value = uint64_t(m_node + 1) * (w.nextSeq + 1);
        InaSend(m_udp, m, dag.nodeAddress[up.dst]);
        w.nextSeq++;
    }
}

void
InaHostApplication::HandleUdp(Ptr<Socket> s)
{
    Dag& dag = Dag::Get();
    Ptr<Packet> p;
    Address from;
    while ((p = s->RecvFrom(from)))
    {
        InaWire w;
        if (!ReadWire(p, w) || !dag.aggs.count(w.agg))
        {
            dag.protocolErrors++;
            continue;
        }
        AggInfo& a = dag.aggs[w.agg];
        if (w.type == InaWire::RESULT)
        {
            auto down = a.workerDown.find(m_node);
            if (down == a.workerDown.end() || !m_workers.count(w.agg))
            {
                dag.protocolErrors++;
                continue;
            }
            if (w.value != a.workerWeight * (w.seq + 1))
                dag.sumErrors++;
            DagRecord& r = dag.records[down->second];
            r.delivered += w.len;
            Worker& wk = m_workers[w.agg];
            wk.results++;
            if (wk.results == a.packets)
            {
                dag.Finish(down->second);
                // the aggregation ends with its last worker's last result: its
                // reservation ends then, as the replayer's unit's
                if (++a.workersDone == a.workerDown.size())
                    InaSlotAdmission::Get().Release(w.agg);
            }
            PumpIna(w.agg);
        }
        else if (w.type == InaWire::RING_DATA)
            OnRingData(w);
        else if (w.type == InaWire::RING_ACK)
            OnRingAck(w);
        else
            dag.protocolErrors++;
    }
}

// ---------------------------------------------------------------- slot policy

InaSlotAdmission&
InaSlotAdmission::Get()
{
    static InaSlotAdmission admission;
    return admission;
}

uint32_t
InaSlotAdmission::Capacity(uint32_t sw, uint32_t cls) const
{
    Dag& dag = Dag::Get();
    uint32_t pool = dag.switchApps[sw] ? dag.switchApps[sw]->Slots() : 0;
    if (dag.params.inaPolicy != "static")
        return pool;
    // The pool split evenly among the classes INA is enabled for (as the replayer's
    // Pools: compute never aggregates and a class listed twice counts once); a class
    // without a share has no slot.
    std::set<std::string> enabled;
    for (const std::string& c : dag.params.inaClasses)
        if (c != "compute")
            enabled.insert(c);
    bool listed = cls < dag.params.inaClasses.size() && dag.params.inaClasses[cls] != "compute";
    return listed ? pool / uint32_t(enabled.size()) : 0;
}

uint32_t
InaSlotAdmission::Free(uint32_t sw, uint32_t cls) const
{
    uint32_t used = 0;
    auto it = m_reserved.find(sw);
    if (it != m_reserved.end())
    {
        for (const auto& [c, n] : it->second)
            if (Dag::Get().params.inaPolicy != "static" || c == cls)
                used += n;
    }
    uint32_t cap = Capacity(sw, cls);
    return cap > used ? cap - used : 0;
}

uint32_t
InaSlotAdmission::Reserved(uint32_t sw) const
{
    uint32_t used = 0;
    auto it = m_reserved.find(sw);
    if (it != m_reserved.end())
        for (const auto& [c, n] : it->second)
            used += n;
    return used;
}

Admission
InaSlotAdmission::Decide(uint64_t agg, uint32_t& w) const
{
    Dag& dag = Dag::Get();
    const AggInfo& a = dag.aggs.at(agg);
    const std::string& policy = dag.params.inaPolicy;
    uint32_t cls = a.priority;
    uint32_t want = std::min(dag.params.inaWindow, a.packets);
    uint32_t capacity = UINT32_MAX;
    for (const auto& [sw, here] : a.switches)
        capacity = std::min(capacity, Capacity(sw, cls));
    w = 0;
    if (capacity == 0 || dag.params.inaWindow == 0)
        return Admission::Fallback; // no pool to draw from: the packets go to an end host
    if (want == 0)
        return Admission::Granted; // an empty stream holds nothing
    if (policy == "planned")
    {
        // the pool this stream draws from is its group's reservation (reservations.txt),
        // the smallest over its switches, as the replayer grants min(reservation, window)
        uint32_t reserved = UINT32_MAX;
        for (const auto& [sw, here] : a.switches)
        {
            auto r = dag.reservations.find({agg, sw});
            reserved = std::min(reserved, r == dag.reservations.end() ? 0u : r->second);
        }
        w = std::min(want, reserved);
    }
    else
        w = std::min(want, capacity);
    bool fits = w > 0;
    for (const auto& [sw, here] : a.switches)
        fits = fits && Free(sw, cls) >= w;
    if (fits)
        return Admission::Granted;
    return policy == "best-effort" ? Admission::Fallback : Admission::Waiting;
}

void
InaSlotAdmission::Change(uint64_t agg, uint32_t w, bool take)
{
    const AggInfo& a = Dag::Get().aggs.at(agg);
    for (const auto& [sw, here] : a.switches)
    {
        uint32_t& n = m_reserved[sw][a.priority];
        n = take ? n + w : n - w;
    }
}

void
InaSlotAdmission::Admit(uint64_t agg, Admission answer, uint32_t w)
{
    Dag& dag = Dag::Get();
    AggInfo& a = dag.aggs[agg];
    a.admission = answer;
    a.slots = answer == Admission::Granted ? w : 0;
    if (a.slots > 0)
        Change(agg, a.slots, true);
    NS_LOG_INFO("aggregation " << agg << (answer == Admission::Granted ? " granted " : " falls back, ")
                               << a.slots << " slots per switch after waiting "
                               << (Simulator::Now().GetNanoSeconds() - a.askedNs) << " ns");
    for (const auto& [worker, up] : a.workerUp)
        dag.hostApps[worker]->Admitted(agg);
}

void
InaSlotAdmission::Ask(uint64_t agg)
{
    Dag::Get().aggs[agg].askedNs = Simulator::Now().GetNanoSeconds();
    // Asks of one instant are answered together after that instant's other events (the
    // releases among them), in aggregation-id order, as the replayer handles the ends
    // of an instant before its starts and its starts by aggregation: a tie is not
    // broken by the order the simulator happened to run the workers' events in.
    if (m_asking.empty())
        Simulator::ScheduleNow(&InaSlotAdmission::AnswerAsks, this);
    m_asking.insert(agg);
}

void
InaSlotAdmission::AnswerAsks()
{
    Dag& dag = Dag::Get();
    std::set<uint64_t> asking;
    asking.swap(m_asking);
    for (uint64_t agg : asking)
    {
        AggInfo& a = dag.aggs[agg];
        uint32_t w = 0;
        Admission answer = Decide(agg, w);
        if (answer != Admission::Waiting)
        {
            Admit(agg, answer, w);
            continue;
        }
        a.admission = Admission::Waiting;
        uint32_t rank = dag.params.inaPolicy == "priority" ? a.priority : 0;
        m_waiting.insert({rank, a.askedNs, agg});
    }
}

void
InaSlotAdmission::Release(uint64_t agg)
{
    AggInfo& a = Dag::Get().aggs[agg];
    if (a.slots > 0)
        Change(agg, a.slots, false);
    ServeWaiting();
}

void
InaSlotAdmission::ServeWaiting()
{
    // In queue order, every waiting aggregation whose slots are free now (the replayer's
    // serve_waiting): one that does not fit does not hold back a later one that does.
    std::vector<std::tuple<uint32_t, int64_t, uint64_t>> order(m_waiting.begin(), m_waiting.end());
    for (const auto& key : order)
    {
        uint64_t agg = std::get<2>(key);
        uint32_t w = 0;
        if (Decide(agg, w) != Admission::Granted)
            continue;
        m_waiting.erase(key);
        Admit(agg, Admission::Granted, w);
    }
}

std::string
InaSlotAdmission::Waiting() const
{
    std::string out;
    for (const auto& key : m_waiting)
    {
        uint64_t agg = std::get<2>(key);
        uint32_t w = 0;
        Decide(agg, w);
        out += (out.empty() ? "" : ", ") + std::string("aggregation ") + std::to_string(agg) +
               " (needs " + std::to_string(w) + " slots on each of " +
               std::to_string(Dag::Get().aggs.at(agg).switches.size()) + " switches)";
    }
    return out;
}

// ---------------------------------------------------------------- switch

TypeId
InaSwitchApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::InaSwitchApplication")
            .SetParent<Application>()
            .SetGroupName("Applications")
            .AddConstructor<InaSwitchApplication>()
            .AddAttribute("Slots",
                          "Aggregator slots in this switch's pool (INA_SLOTS of params.txt; "
                          "0 until set, and a switch refuses to start without it).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&InaSwitchApplication::m_slots),
                          MakeUintegerChecker<uint32_t>())
            .AddTraceSource("SlotsInUse",
                            "Aggregator slots held by streams at this switch.",
                            MakeTraceSourceAccessor(&InaSwitchApplication::m_inUse),
                            "ns3::TracedValueCallback::Uint32");
    return tid;
}

InaSwitchApplication::InaSwitchApplication() = default;
InaSwitchApplication::~InaSwitchApplication() = default;

void
InaSwitchApplication::StartApplication()
{
    m_node = GetNode()->GetId();
    NS_ABORT_MSG_IF(m_slots == 0, "INA switch " << m_node << ": no slot pool set (INA_SLOTS)");
    m_udp = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
    m_udp->Bind(InetSocketAddress(Ipv4Address::GetAny(), INA_PORT));
    m_udp->SetRecvCallback(MakeCallback(&InaSwitchApplication::HandleUdp, this));
}

void
InaSwitchApplication::StopApplication()
{
    if (m_udp)
        m_udp->Close();
}

void
InaSwitchApplication::HandleUdp(Ptr<Socket> s)
{
    Dag& dag = Dag::Get();
    Ptr<Packet> p;
    Address from;
    while ((p = s->RecvFrom(from)))
    {
        InaWire w;
        if (!ReadWire(p, w) || !dag.aggs.count(w.agg) || !dag.aggs[w.agg].switches.count(m_node))
        {
            dag.protocolErrors++;
            continue;
        }
        AggAtSwitch& here = dag.aggs[w.agg].switches[m_node];
        if (w.type == InaWire::DATA)
            OnData(w);
        else if (w.type == InaWire::RESULT)
        {
            if (here.parentDown < 0)
            {
                dag.protocolErrors++;
                continue;
            }
            DagRecord& r = dag.records[here.parentDown];
            r.delivered += w.len;
            if (r.delivered >= r.bytes)
                dag.Finish(here.parentDown);
            InaWire down = w;
            down.from = m_node;
            for (uint32_t d : here.down)
                SendOnEdge(d, down);
            ResultLeft(w.agg);
        }
        else
            dag.protocolErrors++;
    }
}

void
InaSwitchApplication::OnData(const InaWire& w)
{
    Dag& dag = Dag::Get();
    const AggInfo& a = dag.aggs[w.agg];
    Stream& s = m_streams[w.agg];
    if (a.admission != Admission::Granted || s.hold == Hold::Done)
    {
        // a worker sent before its aggregation was granted, or after its last result
        NS_LOG_ERROR("switch " << m_node << ": packet of aggregation " << w.agg
                               << " outside its grant");
        dag.protocolErrors++;
        return;
    }
    if (s.hold == Hold::None)
        Take(w.agg, s, a.slots); // the stream's first packet here
    Feed(w.agg, s, w);
}

void
InaSwitchApplication::Take(uint64_t agg, Stream& s, uint32_t w)
{
    Dag& dag = Dag::Get();
    s.hold = Hold::Slots;
    s.slots = w;
    s.since = Simulator::Now().GetNanoSeconds();
    m_inUse = m_inUse + w;
    dag.slotPeak = std::max<uint64_t>(dag.slotPeak, m_inUse);
    // What a switch holds lies inside its reservations, which the policy kept within the
    // pool: more would be a defect of the admission, reported rather than hidden.
    if (m_inUse > m_slots || m_inUse > InaSlotAdmission::Get().Reserved(m_node))
    {
        NS_LOG_ERROR("switch " << m_node << ": " << m_inUse << " slots in use, pool " << m_slots
                               << ", reserved " << InaSlotAdmission::Get().Reserved(m_node)
                               << " (aggregation " << agg << ")");
        dag.protocolErrors++;
    }
}

void
InaSwitchApplication::Feed(uint64_t agg, Stream& s, const InaWire& w)
{
    // Within its w slots a stream runs as SwitchML's pool: a sequence number takes one of
    // them at its first packet and gives it back when its result leaves downwards. With
    // w below the workers' window (a pool smaller than the window) later sequence numbers
    // wait here, lowest first.
    if (m_state.count({agg, w.seq}))
        Consume(w);
    else if (s.active < s.slots)
    {
        s.active++;
        Consume(w);
    }
    else
        s.queued[w.seq].push_back(w);
}

void
InaSwitchApplication::Consume(const InaWire& w)
{
    Dag& dag = Dag::Get();
    AggInfo& a = dag.aggs[w.agg];
    AggAtSwitch& here = a.switches[m_node];
    int32_t child = -1;
    for (uint32_t c : here.childUp)
    {
        if (dag.records[c].src == w.from)
            child = c;
    }
    if (child < 0)
    {
        dag.protocolErrors++;
        return;
    }
    DagRecord& cr = dag.records[child];
    cr.delivered += w.len;
    if (cr.delivered >= cr.bytes)
        dag.Finish(child);
    auto key = std::make_pair(w.agg, w.seq);
    SeqState& st = m_state[key];
    st.count++;
    st.value += w.value;
    if (st.count == here.fanin)
    {
        uint64_t value = st.value;
        m_state.erase(key);
        Complete(w.agg, w.seq, w.len, value);
    }
}

void
InaSwitchApplication::Complete(uint64_t agg, uint32_t seq, uint32_t len, uint64_t value)
{
    Dag& dag = Dag::Get();
    AggAtSwitch& here = dag.aggs[agg].switches[m_node];
    InaWire m{};
    m.from = m_node;
    m.agg = agg;
    m.seq = seq;
    m.len = len;
    m.value = value;
    if (here.parentUp >= 0)
    {
        m.type = InaWire::DATA;
        SendOnEdge(here.parentUp, m);
        return;
    }
    // The root sends one copy per child edge (multicast as unicast copies).
    m.type = InaWire::RESULT;
    for (uint32_t d : here.down)
        SendOnEdge(d, m);
    ResultLeft(agg);
}

void
InaSwitchApplication::ResultLeft(uint64_t agg)
{
    auto it = m_streams.find(agg);
    if (it == m_streams.end())
        return;
    Stream& s = it->second;
    s.resultsDown++;
    if (s.hold != Hold::Slots)
        return;
    if (s.resultsDown == Dag::Get().aggs[agg].packets)
    {
        Release(agg, s);
        return;
    }
    // One sequence number gave its slot back: the lowest waiting one takes it.
    s.active--;
    if (!s.queued.empty())
    {
        std::vector<InaWire> next = std::move(s.queued.begin()->second);
        s.queued.erase(s.queued.begin());
        s.active++;
        for (const InaWire& w : next)
            Consume(w);
    }
}

void
InaSwitchApplication::Release(uint64_t agg, Stream& s)
{
    Dag& dag = Dag::Get();
    int64_t now = Simulator::Now().GetNanoSeconds();
    dag.slotTime += uint64_t(s.slots) * uint64_t(now - s.since);
    m_inUse = m_inUse - s.slots;
    NS_LOG_INFO("switch " << m_node << " gives back " << s.slots << " slots of aggregation "
                          << agg << " held " << (now - s.since) << " ns");
    s.hold = Hold::Done;
    s.slots = 0;
}

void
InaSwitchApplication::SendOnEdge(uint32_t idx, const InaWire& w)
{
    Dag& dag = Dag::Get();
    if (!dag.records[idx].opened)
    {
        m_edgeQueue[idx].push_back(w);
        return;
    }
    dag.MarkStart(idx);
    InaSend(m_udp, w, dag.nodeAddress[dag.records[idx].dst]);
}

void
InaSwitchApplication::EdgeOpened(uint32_t idx)
{
    auto it = m_edgeQueue.find(idx);
    if (it == m_edgeQueue.end())
        return;
    std::deque<InaWire> q;
    q.swap(it->second);
    m_edgeQueue.erase(it);
    for (const InaWire& w : q)
        SendOnEdge(idx, w);
}

} // namespace ns3
