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
    const DagRecord& r = Dag::Get().records[idx];
    Worker& w = m_workers[r.aggId];
    w.upIdx = idx;
    PumpIna(r.aggId);
}

void
InaHostApplication::PumpIna(uint64_t agg)
{
    Dag& dag = Dag::Get();
    const AggInfo& a = dag.aggs[agg];
    Worker& w = m_workers[agg];
    const DagRecord& up = dag.records[w.upIdx];
    // The window counts slots whose result has not come back (SwitchML's client window).
    while (w.nextSeq < a.packets && w.nextSeq - w.results < dag.params.inaWindow)
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
                dag.Finish(down->second);
            PumpIna(w.agg);
        }
        else if (w.type == InaWire::FB_DATA)
        {
            auto& acc = m_fallback[{w.agg, w.sw, w.seq}];
            acc.first++;
            acc.second += w.value;
            if (acc.first == a.switches[w.sw].fanin)
            {
                InaWire res = w;
                res.type = InaWire::FB_RESULT;
                res.from = m_node;
                res.value = acc.second;
                InaSend(m_udp, res, dag.nodeAddress[w.sw]);
                m_fallback.erase({w.agg, w.sw, w.seq});
            }
        }
        else
            dag.protocolErrors++;
    }
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
                          "Aggregator slots in this switch's pool.",
                          UintegerValue(8192),
                          MakeUintegerAccessor(&InaSwitchApplication::m_slots),
                          MakeUintegerChecker<uint32_t>(1))
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
    Dag& dag = Dag::Get();
    m_node = GetNode()->GetId();
    // Static partition as the replayer does it: the pool split evenly among the traffic
    // classes INA is enabled for.
    m_classShare = std::max<uint32_t>(1, m_slots / std::max<size_t>(1, dag.params.inaClasses.size()));
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
        else if (w.type == InaWire::FB_RESULT)
            Complete(w.agg, w.seq, w.len, w.value);
        else
            dag.protocolErrors++;
    }
}

uint32_t
InaSwitchApplication::Capacity() const
{
    return Dag::Get().params.inaPolicy == "static" ? m_classShare : m_slots;
}

uint32_t
InaSwitchApplication::StreamSlots(uint64_t agg) const
{
    // w = min(window, packets of the stream, the pool it draws from): SwitchML's worker
    // pool of slot indices, never more than the switch could ever grant. Under planned
    // (ina3d plan) the pool is the slots the aggregation's group reserves on this switch
    // (reservations.txt), as the replayer grants min(reservation, window).
    Dag& dag = Dag::Get();
    const AggInfo& a = dag.aggs.at(agg);
    uint32_t pool = Capacity();
    if (dag.params.inaPolicy == "planned")
    {
        auto r = dag.reservations.find({agg, m_node});
        pool = r == dag.reservations.end() ? 0 : std::min(pool, r->second);
    }
    return std::max<uint32_t>(1, std::min({dag.params.inaWindow, a.packets, pool}));
}

bool
InaSwitchApplication::Fits(uint64_t agg, uint32_t w) const
{
    Dag& dag = Dag::Get();
    if (dag.params.inaPolicy == "static")
    {
        auto it = m_classInUse.find(dag.aggs[agg].priority);
        uint32_t used = it == m_classInUse.end() ? 0 : it->second;
        return used + w <= m_classShare;
    }
    return m_inUse + w <= m_slots;
}

bool
InaSwitchApplication::MustQueue(uint64_t agg) const
{
    // Waiting streams keep their order: static serves each class first come first served,
    // priority serves classes in INA_CLASSES order, then arrival.
    Dag& dag = Dag::Get();
    uint32_t prio = dag.aggs[agg].priority;
    for (uint64_t other : m_waitList)
    {
        uint32_t op = dag.aggs[other].priority;
        // planned waits first come first served, whatever the class
        if (dag.params.inaPolicy == "static"    ? op == prio
            : dag.params.inaPolicy == "planned" ? true
                                                : op <= prio)
            return true;
    }
    return false;
}

void
InaSwitchApplication::OnData(const InaWire& w)
{
    Stream& s = m_streams[w.agg];
    if (s.grant == Grant::None)
    {
        // The stream's first packet at this switch: the policy grants or refuses w slots.
        uint32_t need = StreamSlots(w.agg);
        if (!MustQueue(w.agg) && Fits(w.agg, need))
            Take(w.agg, s, need);
        else if (Dag::Get().params.inaPolicy == "best-effort")
            s.grant = Grant::Fallback; // ATP: the stream's packets go on to an end host
        else
        {
            s.grant = Grant::Waiting;
            m_waitList.push_back(w.agg);
        }
    }
    switch (s.grant)
    {
    case Grant::Waiting:
        s.held.push_back(w);
        break;
    case Grant::Slots:
        Feed(w.agg, s, w);
        break;
    default:
        Consume(w, true);
        break;
    }
}

void
InaSwitchApplication::Take(uint64_t agg, Stream& s, uint32_t w)
{
    Dag& dag = Dag::Get();
    s.grant = Grant::Slots;
    s.slots = w;
    s.since = Simulator::Now().GetNanoSeconds();
    m_classInUse[dag.aggs[agg].priority] += w;
    m_inUse = m_inUse + w;
    dag.slotPeak = std::max<uint64_t>(dag.slotPeak, m_inUse);
}

void
InaSwitchApplication::Feed(uint64_t agg, Stream& s, const InaWire& w)
{
    // Within its w slots a stream runs as SwitchML's pool: a sequence number takes one of
    // them at its first packet and gives it back when its result leaves downwards. With
    // w below the workers' window (a pool smaller than the window) later sequence numbers
    // wait here, lowest first.
    if (m_state.count({agg, w.seq}))
        Consume(w, false);
    else if (s.active < s.slots)
    {
        s.active++;
        Consume(w, false);
    }
    else
        s.queued[w.seq].push_back(w);
}

void
InaSwitchApplication::Consume(const InaWire& w, bool fallback)
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
    if (fallback)
    {
        InaWire fb = w;
        fb.type = InaWire::FB_DATA;
        fb.sw = m_node;
        dag.fallbackPackets++;
        InaSend(m_udp, fb, dag.nodeAddress[a.fallbackHost]);
        if (st.count == here.fanin)
            m_state.erase(key);
        return;
    }
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
    if (s.grant != Grant::Slots)
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
            Consume(w, false);
    }
}

void
InaSwitchApplication::Release(uint64_t agg, Stream& s)
{
    Dag& dag = Dag::Get();
    int64_t now = Simulator::Now().GetNanoSeconds();
    dag.slotTime += uint64_t(s.slots) * uint64_t(now - s.since);
    m_classInUse[dag.aggs[agg].priority] -= s.slots;
    m_inUse = m_inUse - s.slots;
    s.grant = Grant::Done;
    s.slots = 0;
    GrantWaiting();
}

void
InaSwitchApplication::GrantWaiting()
{
    Dag& dag = Dag::Get();
    std::vector<uint64_t> order = m_waitList;
    if (dag.params.inaPolicy == "priority")
        std::stable_sort(order.begin(), order.end(), [&dag](uint64_t x, uint64_t y) {
            return dag.aggs[x].priority < dag.aggs[y].priority;
        });
    std::set<uint32_t> blocked; // static: a class whose first waiter does not fit
    std::vector<uint64_t> granted;
    for (uint64_t agg : order)
    {
        uint32_t cls = dag.aggs[agg].priority;
        if (blocked.count(cls))
            continue;
        uint32_t need = StreamSlots(agg);
        if (Fits(agg, need))
        {
            Take(agg, m_streams[agg], need);
            granted.push_back(agg);
        }
        else if (dag.params.inaPolicy == "static")
            blocked.insert(cls);
        else
            break; // priority: strictly in order, no overtaking
    }
    for (uint64_t agg : granted)
        m_waitList.erase(std::find(m_waitList.begin(), m_waitList.end(), agg));
    for (uint64_t agg : granted)
    {
        Stream& s = m_streams[agg];
        std::deque<InaWire> held;
        held.swap(s.held);
        for (const InaWire& w : held)
            Feed(agg, s, w);
    }
}

std::string
InaSwitchApplication::Waiting() const
{
    std::string out;
    for (uint64_t agg : m_waitList)
        out += (out.empty() ? "" : ", ") + std::string("aggregation ") + std::to_string(agg) +
               " (needs " + std::to_string(StreamSlots(agg)) + " slots)";
    return out;
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
