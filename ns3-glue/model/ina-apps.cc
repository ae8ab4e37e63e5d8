/*
 * ina3d glue: the host and switch applications.
 */
#include "ina-apps.h"

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
    sock->SendTo(p, 0, InetSocketAddress(to, INA_PORT));
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
        // Like NCCL's long-lived peer connections: one connection per (src, dst) pair,
        // records sent back to back in the order they start; the receiver splits the
        // byte stream back into records by their sizes.
        Conn& c = m_conns[r.dst];
        dag.pairFifo[{m_node, r.dst}].push_back(idx);
        c.queued += r.bytes;
        if (!c.sock)
        {
            c.sock = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
            c.sock->Bind(InetSocketAddress(dag.nodeAddress[m_node], 0));
            m_connDst[c.sock] = r.dst;
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
    // Bind to the node's identity address so that the receiver's routes back (ACKs) exist.
    s->Bind(InetSocketAddress(dag.nodeAddress[m_node], 0));
    Address local;
    s->GetSockName(local);
    uint16_t port = InetSocketAddress::ConvertFrom(local).GetPort();
    dag.tcpFlowByPort[{m_node, port}] = idx;
    m_tx[s] = TxFlow{idx, 0};
    s->SetConnectCallback(MakeCallback(&InaHostApplication::ConnectOk, this),
                          MakeCallback(&InaHostApplication::ConnectFail, this));
    s->SetSendCallback(MakeCallback(&InaHostApplication::HandleSend, this));
    s->Connect(InetSocketAddress(dag.nodeAddress[r.dst], FLOW_PORT));
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
        m_rxPair[s] = node->second;
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
        std::deque<uint32_t>& fifo = dag.pairFifo[{pr->second, m_node}];
        Ptr<Packet> p;
        while ((p = s->Recv()) && p->GetSize() > 0)
        {
            uint64_t bytes = p->GetSize();
            while (bytes > 0 && !fifo.empty())
            {
                DagRecord& r = dag.records[fifo.front()];
                uint64_t take = std::min<uint64_t>(bytes, r.bytes - r.delivered);
                r.delivered += take;
                bytes -= take;
                if (r.delivered == r.bytes)
                {
                    uint32_t done = fifo.front();
                    fifo.pop_front();
                    dag.Finish(done);
                }
            }
            if (bytes > 0)
                dag.protocolErrors++; // more bytes than the records sent on this pair
        }
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
    static TypeId tid = TypeId("ns3::InaSwitchApplication")
                            .SetParent<Application>()
                            .SetGroupName("Applications")
                            .AddConstructor<InaSwitchApplication>()
                            .AddAttribute("Slots",
                                          "Aggregator slots in this switch's pool.",
                                          UintegerValue(8192),
                                          MakeUintegerAccessor(&InaSwitchApplication::m_slots),
                                          MakeUintegerChecker<uint32_t>(1));
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
        {
            if (!Admit(w))
                m_waiting.push_back(w);
            else
                Consume(w);
        }
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
        }
        else if (w.type == InaWire::FB_RESULT)
            Complete(w.agg, w.seq, w.len, w.value, false);
        else
            dag.protocolErrors++;
    }
}

bool
InaSwitchApplication::TryAllocate(uint64_t agg)
{
    Dag& dag = Dag::Get();
    uint32_t cls = dag.aggs[agg].priority;
    if (dag.params.inaPolicy == "static" && m_classInUse[cls] >= m_classShare)
        return false;
    if (dag.params.inaPolicy == "planned")
    {
        // planned (ina3d plan): an aggregation holds at most the slots its group reserves on
        // this switch (reservations.txt); packets beyond wait, as under static.
        auto r = dag.reservations.find({agg, m_node});
        if (r == dag.reservations.end() || m_aggInUse[agg] >= r->second)
            return false;
    }
    if (m_inUse >= m_slots)
        return false;
    m_inUse++;
    m_aggInUse[agg]++;
    m_classInUse[cls]++;
    dag.slotPeak = std::max<uint64_t>(dag.slotPeak, m_inUse);
    return true;
}

bool
InaSwitchApplication::Admit(const InaWire& w)
{
    auto key = std::make_pair(w.agg, w.seq);
    if (m_state.count(key))
        return true;
    SeqState st;
    if (TryAllocate(w.agg))
        st.slot = true;
    else if (Dag::Get().params.inaPolicy == "best-effort")
        st.fallback = true; // ATP: on exhaustion the packet goes on to an end host
    else
        return false; // static partition and priority wait for a slot
    m_state[key] = st;
    return true;
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
    if (st.fallback)
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
        Complete(w.agg, w.seq, w.len, value, true);
    }
}

void
InaSwitchApplication::Complete(uint64_t agg, uint32_t seq, uint32_t len, uint64_t value,
                               bool hadSlot)
{
    Dag& dag = Dag::Get();
    AggAtSwitch& here = dag.aggs[agg].switches[m_node];
    if (hadSlot)
    {
        m_inUse--;
        m_aggInUse[agg]--;
        m_classInUse[dag.aggs[agg].priority]--;
    }
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
    }
    else
    {
        // The root sends one copy per child edge (multicast as unicast copies).
        m.type = InaWire::RESULT;
        for (uint32_t d : here.down)
            SendOnEdge(d, m);
    }
    if (hadSlot)
        DrainWaiting();
}

void
InaSwitchApplication::DrainWaiting()
{
    if (m_draining)
    {
        m_drainAgain = true;
        return;
    }
    m_draining = true;
    Dag& dag = Dag::Get();
    do
    {
        m_drainAgain = false;
        std::deque<InaWire> cur;
        cur.swap(m_waiting);
        if (dag.params.inaPolicy == "priority")
        {
            std::stable_sort(cur.begin(), cur.end(), [&dag](const InaWire& x, const InaWire& y) {
                return dag.aggs[x.agg].priority < dag.aggs[y.agg].priority;
            });
        }
        std::deque<InaWire> rest;
        for (const InaWire& w : cur)
        {
            if (Admit(w))
                Consume(w);
            else
                rest.push_back(w);
        }
        for (const InaWire& w : m_waiting)
            rest.push_back(w);
        m_waiting.swap(rest);
    } while (m_drainAgain);
    m_draining = false;
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
