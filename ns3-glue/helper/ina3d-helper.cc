#include "ina3d-helper.h"

#include "ns3/traffic-control-module.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace ns3
{

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
            if (t[1] != "best-effort" && t[1] != "static" && t[1] != "priority")
            {
                err = path + ":" + std::to_string(n) + ": INA_POLICY must be best-effort, static or priority";
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
        else if (k == "MTU")
            p.mtu = v;
        else if (k == "QUEUE_PACKETS")
            p.queuePackets = v;
        // unknown keys are ignored so newer emitters stay readable
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
        dag.nodeOfAddress[aa.Get()] = l.a;
        dag.nodeOfAddress[ab.Get()] = l.b;
        if (!haveAddr[l.a])
            dag.nodeAddress[l.a] = aa, haveAddr[l.a] = true;
        if (!haveAddr[l.b])
            dag.nodeAddress[l.b] = ab, haveAddr[l.b] = true;
    }
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
    Ipv4StaticRoutingHelper helper;
    std::string line;
    int n = 0;
    std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> routes;
    while (std::getline(in, line))
    {
        n++;
        auto t = Tokens(line);
        if (t.empty() || t[0][0] == '#')
            continue;
        uint32_t a, b, c = 0;
        bool ok = (t[0] == "ADDR" && t.size() == 3 && ToU32(t[1], a) && ToU32(t[2], b)) ||
                  (t[0] == "ROUTE" && t.size() == 4 && ToU32(t[1], a) && ToU32(t[2], b) &&
                   ToU32(t[3], c));
        if (!ok)
        {
            err = path + ":" + std::to_string(n) + ": expected `ADDR node peer` or `ROUTE node dst next_hop`";
            return false;
        }
        auto port = m_ports.find({a, t[0] == "ADDR" ? b : c});
        if (a >= NodeCount() || b >= NodeCount() || port == m_ports.end())
        {
            err = path + ":" + std::to_string(n) + ": no link between node " + std::to_string(a) +
                  " and node " + std::to_string(t[0] == "ADDR" ? b : c);
            return false;
        }
        if (t[0] == "ADDR")
        {
            Ptr<Ipv4> ip = m_nodes.Get(a)->GetObject<Ipv4>();
            dag.nodeAddress[a] = ip->GetAddress(port->second.ifIndex, 0).GetLocal();
        }
        else
            routes.emplace_back(a, b, c);
    }
    // Host routes after all ADDR lines, since they target identity addresses.
    for (auto& [a, dst, nh] : routes)
    {
        const Port& port = m_ports.at({a, nh});
        Ptr<Ipv4StaticRouting> sr = helper.GetStaticRouting(m_nodes.Get(a)->GetObject<Ipv4>());
        sr->AddHostRouteTo(dag.nodeAddress[dst], port.peer, port.ifIndex);
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
