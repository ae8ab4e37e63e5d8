#include "ina3d-helper.h"

#include <cerrno>

#include "ns3/traffic-control-module.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace ns3
{

Ina3dPairRoutingHelper*
Ina3dPairRoutingHelper::Copy() const
{
    return new Ina3dPairRoutingHelper(*this);
}

Ptr<Ipv4RoutingProtocol>
Ina3dPairRoutingHelper::Create(Ptr<Node>) const
{
    return CreateObject<Ina3dPairRouting>();
}

static std::vector<std::string>
Tokens(const std::string& line)
{
    std::istringstream ss(line);
    std::vector<std::string> t;
    std::string x;
    while (ss >> x)
        t.push_back(x);
    return t;
}

static bool
ToU32(const std::string& s, uint32_t& v)
{
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9)
        return false;
    v = std::stoul(s);
    return true;
}

bool
Ina3dHelper::ReadParams(const std::string& path, GlueParams& p, std::string& err)
{
    std::ifstream in(path);
    if (!in)
    {
        err = path + ": cannot open";
        return false;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line))
    {
        n++;
        auto t = Tokens(line);
        if (t.empty() || t[0][0] == '#')
            continue;
        if (t.size() != 2)
        {
            err = path + ":" + std::to_string(n) + ": expected `KEY value`";
            return false;
        }
        uint32_t v = 0;
        bool num = ToU32(t[1], v);
        const std::string& k = t[0];
        if (k == "INA_POLICY")
        {
            if (t[1] != "best-effort" && t[1] != "static" && t[1] != "priority" && t[1] != "planned")
            {
                err = path + ":" + std::to_string(n) + ": INA_POLICY must be best-effort, static, priority or planned";
                return false;
            }
            p.inaPolicy = t[1];
        }
        else if (k == "TCP_CONNECTIONS")
        {
            if (t[1] != "persistent" && t[1] != "per-flow")
            {
                err = path + ":" + std::to_string(n) + ": TCP_CONNECTIONS must be persistent or per-flow";
                return false;
            }
            p.persistentTcp = t[1] == "persistent";
        }
        else if (k == "SEED")
            continue; // routes were computed by ina3d with it; kept for provenance
        else if (k == "INA_CLASSES")
        {
            p.inaClasses.clear();
            std::stringstream ss(t[1]);
            std::string c;
            while (std::getline(ss, c, ','))
                p.inaClasses.push_back(c);
        }
        else if (k == "FLAVOR")
            p.flavor = t[1];
        else if (k == "STOP_TIME_S")
            p.stopTimeS = std::atof(t[1].c_str());
        else if (!num || v == 0)
        {
            err = path + ":" + std::to_string(n) + ": " + k + ": expected a positive integer";
            return false;
        }
        else if (k == "INA_SLOTS")
            p.inaSlots = v;
        else if (k == "INA_PAYLOAD")
            p.inaPayload = v;
        else if (k == "INA_WINDOW")
            p.inaWindow = v;
        else if (k == "TCP_SEGMENT")
            p.tcpSegment = v;
        else if (k == "TCP_INITIAL_CWND")
            p.tcpInitialCwnd = v;
        else if (k == "MTU")
            p.mtu = v;
        else if (k == "QUEUE_PACKETS")
            p.queuePackets = v;
        // unknown keys are ignored so newer emitters stay readable
    }
    return true;
}

bool
Ina3dHelper::ReadReservations(const std::string& path, Dag& dag, std::string& err)
{
    // `agg_id switch slots` per line, written by `ina3d ns3 emit` for the planned policy
    // (the plan's slots for each aggregation on each of its switches).
    std::ifstream in(path);
    if (!in)
    {
        err = path + ": cannot open (the planned INA policy needs it)";
        return false;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line))
    {
        n++;
        auto t = Tokens(line);
        if (t.empty() || t[0][0] == '#')
            continue;
        uint32_t sw = 0;
        uint32_t slots = 0;
        char* end = nullptr;
        errno = 0;
        unsigned long long agg = t.size() == 3 ? std::strtoull(t[0].c_str(), &end, 10) : 0;
        if (t.size() != 3 || errno != 0 || end == nullptr || *end != '\0' || !ToU32(t[1], sw) ||
            !ToU32(t[2], slots) || slots == 0)
        {
            err = path + ":" + std::to_string(n) + ": expected `agg_id switch slots` (slots >= 1)";
            return false;
        }
        dag.reservations[{agg, sw}] = slots;
    }
    return true;
}

bool
Ina3dHelper::ReadTopology(const std::string& path, std::string& err)
{
    std::ifstream in(path);
    if (!in)
    {
        err = path + ": cannot open";
        return false;
    }
    std::string header;
    std::getline(in, header);
    auto h = Tokens(header);
    uint32_t nodes = 0, sw = 0, links = 0, nv = 0;
    bool ok;
    if (h.size() == 3)
        ok = ToU32(h[0], nodes) && ToU32(h[1], sw) && ToU32(h[2], links);
    else if (h.size() == 6)
    {
        uint32_t gps;
        ok = ToU32(h[0], nodes) && ToU32(h[1], gps) && ToU32(h[2], nv) && ToU32(h[3], sw) &&
             ToU32(h[4], links);
    }
    else
        ok = false;
    if (!ok)
    {
        err = path + ":1: expected `<nodes> <switches> <links>` or SimAI's 6-field header";
        return false;
    }
    m_isSwitch.assign(nodes, false);
    std::string tok;
    for (uint32_t i = 0; i < sw + nv; i++)
    {
        uint32_t id;
        if (!(in >> tok) || !ToU32(tok, id) || id >= nodes)
        {
            err = path + ":2: switch id " + std::to_string(i) + " missing or not below " +
                  std::to_string(nodes);
            return false;
        }
        m_isSwitch[id] = true;
    }
    static const std::regex rate("^[0-9]+(\\.[0-9]+)?(Gbps|Mbps|Kbps|bps)$");
    static const std::regex delay("^[0-9]+(\\.[0-9]+)?(e-?[0-9]+)?(ns|us|ms|s)$");
    for (uint32_t i = 0; i < links; i++)
    {
        LinkSpec l;
        std::string a, b, e;
        if (!(in >> a >> b >> l.rate >> l.delay >> e) || !ToU32(a, l.a) || !ToU32(b, l.b) ||
            l.a >= nodes || l.b >= nodes)
        {
            err = path + ": link row " + std::to_string(i + 1) + ": expected `a b rate delay error_rate` with node ids below " +
                  std::to_string(nodes);
            return false;
        }
        if (!std::regex_match(l.rate, rate) || !std::regex_match(l.delay, delay))
        {
            err = path + ": link row " + std::to_string(i + 1) + ": unsupported rate `" + l.rate +
                  "` or delay `" + l.delay + "`";
            return false;
        }
        m_links.push_back(l);
    }
    return true;
}

void
Ina3dHelper::BuildNetwork(const GlueParams& p)
{
    Dag& dag = Dag::Get();
    m_nodes.Create(m_isSwitch.size());
    InternetStackHelper stack;
    // Per-(source, destination) routes only: no static or global routing to fall back on.
    stack.SetRoutingHelper(Ina3dPairRoutingHelper());
    stack.Install(m_nodes);
    Ipv4AddressHelper addr("10.0.0.0", "255.255.255.252");
    TrafficControlHelper tch;
    dag.nodeAddress.assign(m_isSwitch.size(), Ipv4Address());
    std::vector<bool> haveAddr(m_isSwitch.size(), false);
    for (const LinkSpec& l : m_links)
    {
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", StringValue(l.rate));
        p2p.SetDeviceAttribute("Mtu", UintegerValue(p.mtu));
        p2p.SetChannelAttribute("Delay", StringValue(l.delay));
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                     QueueSizeValue(QueueSize(std::to_string(p.queuePackets) + "p")));
        NetDeviceContainer d = p2p.Install(m_nodes.Get(l.a), m_nodes.Get(l.b));
        Ipv4InterfaceContainer ifs = addr.Assign(d);
        addr.NewNetwork();
        // No queue disc: the device's deep drop-tail queue is the only queue, so the
        // network is effectively lossless (see README).
        tch.Uninstall(d);
        uint32_t ia = ifs.Get(0).second, ib = ifs.Get(1).second;
        Ipv4Address aa = ifs.GetAddress(0), ab = ifs.GetAddress(1);
        m_ports.emplace(std::make_pair(l.a, l.b), Port{ia, ab});
        m_ports.emplace(std::make_pair(l.b, l.a), Port{ib, aa});
        m_linkPorts.push_back(LinkPorts{Port{ia, ab}, Port{ib, aa}});
        dag.nodeOfAddress[aa.Get()] = l.a;
        dag.nodeOfAddress[ab.Get()] = l.b;
        if (!haveAddr[l.a])
            dag.nodeAddress[l.a] = aa, haveAddr[l.a] = true;
        if (!haveAddr[l.b])
            dag.nodeAddress[l.b] = ab, haveAddr[l.b] = true;
    }
    auto addresses = std::make_shared<const Ina3dPairRouting::AddressMap>(dag.nodeOfAddress);
    for (uint32_t n = 0; n < m_nodes.GetN(); n++)
        Routing(n)->SetAddressMap(addresses);
}

Ptr<Ina3dPairRouting>
Ina3dHelper::Routing(uint32_t node) const
{
    Ptr<Ina3dPairRouting> r =
        DynamicCast<Ina3dPairRouting>(m_nodes.Get(node)->GetObject<Ipv4>()->GetRoutingProtocol());
    NS_ASSERT_MSG(r, "node " << node << " has no Ina3dPairRouting");
    return r;
}

bool
Ina3dHelper::ReadRoutes(const std::string& path, std::string& err)
{
    Dag& dag = Dag::Get();
    std::ifstream in(path);
    if (!in)
    {
        err = path + ": cannot open";
        return false;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line))
    {
        n++;
        auto t = Tokens(line);
        if (t.empty() || t[0][0] == '#')
            continue;
        const std::string at = path + ":" + std::to_string(n) + ": ";
        uint32_t a, b;
        if (t[0] == "ADDR" && t.size() == 3 && ToU32(t[1], a) && ToU32(t[2], b))
        {
            auto port = m_ports.find({a, b});
            if (port == m_ports.end())
            {
                err = at + "ADDR: no link between node " + t[1] + " and node " + t[2];
                return false;
            }
            Ptr<Ipv4> ip = m_nodes.Get(a)->GetObject<Ipv4>();
            dag.nodeAddress[a] = ip->GetAddress(port->second.ifIndex, 0).GetLocal();
            continue;
        }
        if (t[0] != "PATH" || t.size() < 4 || !ToU32(t[1], a) || !ToU32(t[2], b) ||
            a >= NodeCount() || b >= NodeCount() || a == b)
        {
            err = at + "expected `ADDR node peer` or `PATH src dst node:link...` with distinct node ids below " +
                  std::to_string(NodeCount());
            return false;
        }
        // Walk the hops: at each node, packets of (a, b) leave over the hop's link.
        uint32_t u = a;
        for (size_t k = 3; k < t.size(); k++)
        {
            size_t colon = t[k].find(':');
            uint32_t v, l;
            if (colon == std::string::npos || !ToU32(t[k].substr(0, colon), v) ||
                !ToU32(t[k].substr(colon + 1), l) || l >= m_links.size())
            {
                err = at + "hop " + std::to_string(k - 2) + ": expected `node:link` with a link row below " +
                      std::to_string(m_links.size()) + ", found `" + t[k] + "`";
                return false;
            }
            const LinkSpec& spec = m_links[l];
            if (!((spec.a == u && spec.b == v) || (spec.b == u && spec.a == v)))
            {
                err = at + "hop " + std::to_string(k - 2) + ": link " + std::to_string(l) +
                      " does not join node " + std::to_string(u) + " and node " + std::to_string(v);
                return false;
            }
            const Port& port = spec.a == u ? m_linkPorts[l].atA : m_linkPorts[l].atB;
            if (!Routing(u)->AddPairRoute(a, b, port.ifIndex, port.peer))
            {
                err = at + "node " + std::to_string(u) + " already routes the pair " + t[1] + " " + t[2] +
                      " (a repeated pair or a path through a node twice)";
                return false;
            }
            u = v;
        }
        if (u != b)
        {
            err = at + "the path ends at node " + std::to_string(u) + ", not at its destination " + t[2];
            return false;
        }
    }
    return true;
}

ApplicationContainer
Ina3dHelper::InstallApplications()
{
    Dag& dag = Dag::Get();
    ApplicationContainer apps;
    dag.hostApps.assign(NodeCount(), nullptr);
    dag.switchApps.assign(NodeCount(), nullptr);
    std::vector<bool> aggregates(NodeCount(), false);
    for (auto& [id, a] : dag.aggs)
        for (auto& [sw, s] : a.switches)
            aggregates[sw] = true;
    for (uint32_t n = 0; n < NodeCount(); n++)
    {
        if (!m_isSwitch[n])
        {
            Ptr<InaHostApplication> app = CreateObject<InaHostApplication>();
            m_nodes.Get(n)->AddApplication(app);
            dag.hostApps[n] = app;
            apps.Add(app);
        }
        else if (aggregates[n])
        {
            Ptr<InaSwitchApplication> app = CreateObject<InaSwitchApplication>();
            app->SetAttribute("Slots", UintegerValue(dag.params.inaSlots));
            m_nodes.Get(n)->AddApplication(app);
            dag.switchApps[n] = app;
            apps.Add(app);
        }
    }
    apps.Start(Seconds(0));
    return apps;
}

} // namespace ns3
