#include "ina3d-helper.h"

#include <cerrno>

#include "ns3/traffic-control-module.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
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

static bool ToDouble(const std::string& s, double& v);

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
        else if (k == "TRANSPORT")
        {
            if (t[1] == "roce")
                p.transport = Transport::Roce;
            else if (t[1] == "tcp")
                p.transport = Transport::Tcp;
            else
            {
                err = path + ":" + std::to_string(n) + ": TRANSPORT: unknown transport `" + t[1] +
                      "` (expected roce or tcp)";
                return false;
            }
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
        {
            // ns-3's clock holds 2^63 ps (about 106 days); a stop time must be on it
            double s = 0;
            if (!ToDouble(t[1], s) || s <= 0 || s > 1e6)
            {
                err = path + ":" + std::to_string(n) +
                      ": STOP_TIME_S: expected seconds in (0, 1000000], found `" + t[1] + "`";
                return false;
            }
            p.stopTimeS = s;
        }
        else if (k == "RATE_LOG" && t[1] == "0")
            p.rateLog = false;
        else if (k == "TCP_WINDOW_BDPS")
        {
            double w = 0;
            if (!ToDouble(t[1], w) || w < 0.1 || w > 1000)
            {
                err = path + ":" + std::to_string(n) + ": TCP_WINDOW_BDPS: expected a number of bandwidth-delay products in [0.1, 1000]";
                return false;
            }
            p.tcpWindowBdps = w;
        }
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
        else if (k == "NET_PAYLOAD" || k == "TCP_SEGMENT")
            p.tcpSegment = v;
        else if (k == "TCP_INITIAL_CWND")
            p.tcpInitialCwnd = v;
        else if (k == "TCP_BUFFER")
            p.tcpBuffer = v;
        else if (k == "RATE_LOG")
            p.rateLog = v != 0;
        else if (k == "MTU")
            p.mtu = v;
        else if (k == "QUEUE_PACKETS")
            p.queuePackets = v;
        // unknown keys are ignored so newer emitters stay readable
    }
    if (!p.inaSlots)
    {
        err = path + ": INA_SLOTS missing (aggregator slots per switch; `ina3d ns3 emit` writes it)";
        return false;
    }
    return true;
}

/** A finite number, the whole token. */
static bool
ToDouble(const std::string& s, double& v)
{
    if (s.empty())
        return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtod(s.c_str(), &end);
    return errno == 0 && *end == '\0' && std::isfinite(v);
}

/** `50Mb/s`, `100Gbps`, ... in bit/s (config.txt writes HPCC's `Mb/s` spelling). */
static bool
ToBps(const std::string& s, uint64_t& bps)
{
    static const std::regex re("^([0-9]+(\\.[0-9]+)?)(b/s|Kb/s|Mb/s|Gb/s|bps|Kbps|Mbps|Gbps)$");
    std::smatch m;
    if (!std::regex_match(s, m, re))
        return false;
    double x = std::stod(m[1].str());
    std::string u = m[3].str();
    double scale = u[0] == 'K' ? 1e3 : u[0] == 'M' ? 1e6 : u[0] == 'G' ? 1e9 : 1.0;
    if (x * scale > 1e16)
        return false;
    bps = uint64_t(std::llround(x * scale));
    return bps > 0;
}

bool
Ina3dHelper::ReadConfig(const std::string& path, std::string& err, std::vector<std::string>& warnings)
{
    m_configPath = path;
    std::ifstream in(path);
    if (!in)
    {
        err = path + ": cannot open (TRANSPORT roce reads its DCQCN parameters and ECN maps)";
        return false;
    }
    DcqcnConfig& c = m_roce.dcqcn;
    // The DCQCN keys, each with SimAI's value (DcqcnConfig's default) as the fallback.
    struct Key
    {
        const char* name;
        const char* fallback;
        bool seen;
    };
    std::vector<Key> keys = {{"EWMA_GAIN", "0.00390625", false},
                             {"ALPHA_RESUME_INTERVAL", "1 (µs)", false},
                             {"RATE_DECREASE_INTERVAL", "4 (µs)", false},
                             {"RP_TIMER", "900 (µs)", false},
                             {"FAST_RECOVERY_TIMES", "1", false},
                             {"RATE_AI", "50Mb/s", false},
                             {"RATE_HAI", "100Mb/s", false},
                             {"MIN_RATE", "100Mb/s", false},
                             {"CLAMP_TARGET_RATE", "0", false}};
    std::string line;
    int n = 0;
    while (std::getline(in, line))
    {
        n++;
        auto t = Tokens(line);
        if (t.empty() || t[0][0] == '#')
            continue;
        const std::string& k = t[0];
        const std::string at = path + ":" + std::to_string(n) + ": " + k + ": ";
        for (Key& key : keys)
            if (k == key.name)
                key.seen = true;
        double d = 0;
        uint64_t bps = 0;
        auto us = [&](int64_t& ns) {
            if (t.size() != 2 || !ToDouble(t[1], d) || d <= 0 || d > 1e9)
            {
                err = at + "expected a positive number of microseconds";
                return false;
            }
            ns = std::max<int64_t>(1, std::llround(d * 1000));
            return true;
        };
        auto rate = [&](uint64_t& out) {
            if (t.size() != 2 || !ToBps(t[1], bps))
            {
                err = at + "expected a rate such as 50Mb/s, found `" + (t.size() > 1 ? t[1] : "") + "`";
                return false;
            }
            out = bps;
            return true;
        };
        if (k == "EWMA_GAIN")
        {
            if (t.size() != 2 || !ToDouble(t[1], d) || d <= 0 || d > 1)
            {
                err = at + "expected a gain in (0, 1]";
                return false;
            }
            c.ewmaGain = d;
        }
        else if (k == "ALPHA_RESUME_INTERVAL" && !us(c.alphaResumeNs))
            return false;
        else if (k == "RATE_DECREASE_INTERVAL" && !us(c.rateDecreaseNs))
            return false;
        else if (k == "RP_TIMER" && !us(c.rpTimerNs))
            return false;
        else if (k == "FAST_RECOVERY_TIMES" || k == "RP_BYTE_COUNTER" || k == "CLAMP_TARGET_RATE" ||
                 k == "CC_MODE")
        {
            uint32_t v = 0;
            if (t.size() != 2 || !ToU32(t[1], v))
            {
                err = at + "expected a non-negative integer";
                return false;
            }
            if (k == "FAST_RECOVERY_TIMES")
                c.fastRecoveryTimes = v;
            else if (k == "RP_BYTE_COUNTER")
                c.byteCounter = v;
            else if (k == "CLAMP_TARGET_RATE")
                c.clampTargetRate = v != 0;
            else if (v != 1)
            {
                err = at + "the glue's roce transport models DCQCN only (CC_MODE 1), found " + t[1];
                return false;
            }
        }
        else if (k == "RATE_AI" && !rate(c.rateAiBps))
            return false;
        else if (k == "RATE_HAI" && !rate(c.rateHaiBps))
            return false;
        else if (k == "MIN_RATE" && !rate(c.minRateBps))
            return false;
        else if (k == "KMIN_MAP" || k == "KMAX_MAP" || k == "PMAX_MAP")
        {
            // `n rate value rate value ...`
            uint32_t count = 0;
            if (t.size() < 2 || !ToU32(t[1], count) || t.size() != 2 + 2 * size_t(count))
            {
                err = at + "expected `<n>` then n pairs `<rate bit/s> <value>`";
                return false;
            }
            std::map<uint64_t, double>& m =
                k == "KMIN_MAP" ? m_roce.kmin : k == "KMAX_MAP" ? m_roce.kmax : m_roce.pmax;
            (k == "KMIN_MAP" ? m_roce.kminLine : k == "KMAX_MAP" ? m_roce.kmaxLine : m_roce.pmaxLine) = n;
            for (uint32_t i = 0; i < count; i++)
            {
                const std::string& r = t[2 + 2 * i];
                const std::string& v = t[3 + 2 * i];
                if (r.empty() || r.find_first_not_of("0123456789") != std::string::npos || r.size() > 16 ||
                    !ToDouble(v, d) || d < 0 || (k == "PMAX_MAP" && (d <= 0 || d > 1)))
                {
                    err = at + "pair " + std::to_string(i + 1) + " `" + r + " " + v +
                          "`: expected a rate in bit/s and " +
                          (k == "PMAX_MAP" ? "a probability in (0, 1]" : "a threshold in KB");
                    return false;
                }
                m[std::stoull(r)] = d;
            }
        }
    }
    for (const Key& key : keys)
        if (!key.seen)
            warnings.push_back(path + ": " + key.name + " missing; using SimAI's value " + key.fallback);
    for (auto [name, line] : {std::make_pair("KMIN_MAP", m_roce.kminLine),
                              std::make_pair("KMAX_MAP", m_roce.kmaxLine),
                              std::make_pair("PMAX_MAP", m_roce.pmaxLine)})
    {
        if (line == 0)
        {
            err = path + ": " + name + " missing: TRANSPORT roce needs the ECN thresholds of every link rate";
            return false;
        }
    }
    return true;
}

bool
Ina3dHelper::Thresholds(uint64_t bps, const LinkSpec& l, EcnThresholds& t, std::string& err) const
{
    auto find = [&](const std::map<uint64_t, double>& m, const char* key, int line, double& out) {
        auto it = m.find(bps);
        if (it == m.end())
        {
            err = m_configPath + ":" + std::to_string(line) + ": " + key + " has no entry for " +
                  std::to_string(bps) + " bit/s, the rate of the link " + std::to_string(l.a) + " - " +
                  std::to_string(l.b) + " (" + l.rate + ")";
            return false;
        }
        out = it->second;
        return true;
    };
    if (!find(m_roce.kmin, "KMIN_MAP", m_roce.kminLine, t.kminKb) ||
        !find(m_roce.kmax, "KMAX_MAP", m_roce.kmaxLine, t.kmaxKb) ||
        !find(m_roce.pmax, "PMAX_MAP", m_roce.pmaxLine, t.pmax))
        return false;
    if (!(t.kminKb < t.kmaxKb))
    {
        err = m_configPath + ":" + std::to_string(m_roce.kminLine) + ": KMIN_MAP: " +
              std::to_string(bps) + " bit/s: KMIN (" + std::to_string(t.kminKb) +
              " KB) must be below KMAX (" + std::to_string(t.kmaxKb) + " KB, line " +
              std::to_string(m_roce.kmaxLine) + ")";
        return false;
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

bool
Ina3dHelper::BuildNetwork(const GlueParams& p, std::string& err)
{
    Dag& dag = Dag::Get();
    m_nodes.Create(m_isSwitch.size());
    InternetStackHelper stack;
    // Per-(source, destination) routes only: no static or global routing to fall back on.
    stack.SetRoutingHelper(Ina3dPairRoutingHelper());
    stack.Install(m_nodes);
    Ipv4AddressHelper addr("10.0.0.0", "255.255.255.252");
    TrafficControlHelper none;
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
        uint32_t row = m_linkPorts.size();
        uint64_t bps = DataRate(l.rate).GetBitRate();
        dag.links.Watch(DynamicCast<PointToPointNetDevice>(d.Get(0)), row, false, l.a, l.b, bps);
        dag.links.Watch(DynamicCast<PointToPointNetDevice>(d.Get(1)), row, true, l.b, l.a, bps);
        Ipv4InterfaceContainer ifs = addr.Assign(d);
        addr.NewNetwork();
        // No default queue disc: under tcp the device's deep drop-tail queue is the only
        // queue, so the network is effectively lossless (see README).
        none.Uninstall(d);
        if (p.transport == Transport::Tcp)
        {
            for (uint32_t end = 0; end < 2; end++)
            {
                uint32_t from = end == 0 ? l.a : l.b, to = end == 0 ? l.b : l.a;
                if (!m_isSwitch[from])
                    InstallFlowQueues(DynamicCast<PointToPointNetDevice>(d.Get(end)), p, from, to);
            }
        }
        else
        {
            EcnThresholds th;
            if ((m_isSwitch[l.a] || m_isSwitch[l.b]) && !Thresholds(bps, l, th, err))
                return false;
            for (uint32_t end = 0; end < 2; end++)
            {
                uint32_t from = end == 0 ? l.a : l.b, to = end == 0 ? l.b : l.a;
                if (m_isSwitch[from])
                    InstallEcn(DynamicCast<PointToPointNetDevice>(d.Get(end)), th, l, p, from, to);
            }
        }
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
    return true;
}

void
Ina3dHelper::InstallFlowQueues(Ptr<PointToPointNetDevice> dev, const GlueParams& p, uint32_t from,
                               uint32_t to)
{
    // A host NIC serves its connections' queues in turn (deficit round robin over 5-tuple
    // flows, as a NIC's send queues), so the ACKs a host returns do not wait behind a whole
    // window of its own data: with one FIFO they would, inflating every round trip by that
    // window. CoDel's dropping is switched off (targets of seconds): the network stays
    // lossless, and any overflow is a drop the run reports.
    TrafficControlHelper tch;
    tch.SetRootQueueDisc("ns3::FqCoDelQueueDisc",
                         "Target", StringValue("1s"),
                         "Interval", StringValue("10s"),
                         "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, p.queuePackets)));
    QueueDiscContainer qd = tch.Install(dev);
    Dag::Get().links.WatchQueueDisc(qd.Get(0), from, to);
    dev->GetQueue()->SetMaxSize(QueueSize("1p"));
}

void
Ina3dHelper::InstallEcn(Ptr<PointToPointNetDevice> dev, const EcnThresholds& th, const LinkSpec& l,
                        const GlueParams& p, uint32_t from, uint32_t to)
{
    // DCQCN's congestion point: mark CE on the instantaneous egress queue (QW = 1) with a
    // probability rising linearly from 0 at KMIN to PMAX at KMAX, and on every packet above
    // KMAX (Gentle off, marking instead of dropping); thresholds in KB of 1,000 bytes as
    // HPCC's switch reads them. The queue itself is deep enough never to drop.
    TrafficControlHelper tch;
    tch.SetRootQueueDisc("ns3::RedQueueDisc",
                         "MinTh", DoubleValue(th.kminKb * 1000),
                         "MaxTh", DoubleValue(th.kmaxKb * 1000),
                         "LInterm", DoubleValue(1.0 / th.pmax),
                         "QW", DoubleValue(1.0),
                         "UseEcn", BooleanValue(true),
                         "UseHardDrop", BooleanValue(false),
                         "Gentle", BooleanValue(false),
                         "MeanPktSize", UintegerValue(1048),
                         "LinkBandwidth", DataRateValue(DataRate(l.rate)),
                         "LinkDelay", TimeValue(Time(l.delay)),
                         "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::BYTES,
                                                             uint64_t(p.queuePackets) * p.mtu)));
    QueueDiscContainer qd = tch.Install(dev);
    Dag::Get().links.WatchQueueDisc(qd.Get(0), from, to);
    // the queue disc holds the queue: the device keeps one packet behind the one on the wire
    dev->GetQueue()->SetMaxSize(QueueSize("1p"));
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
        if (t[0] != "PATH" || t.size() < 5 || !ToU32(t[1], a) || !ToU32(t[2], b) ||
            a >= NodeCount() || b >= NodeCount() || a == b)
        {
            err = at + "expected `ADDR node peer` or `PATH src dst channel node:link...` with distinct node ids below " +
                  std::to_string(NodeCount());
            return false;
        }
        uint32_t ch;
        if (!ToU32(t[3], ch))
        {
            err = at + "channel: expected an NCCL channel number, found `" + t[3] +
                  "` (routes v2 files, without channels, must be emitted again)";
            return false;
        }
        // Walk the hops: at each node, packets of connection (a, b, ch) leave over the hop's link.
        uint32_t u = a;
        uint64_t bottleneck = UINT64_MAX;
        int64_t rttNs = 0;
        for (size_t k = 4; k < t.size(); k++)
        {
            size_t colon = t[k].find(':');
            uint32_t v, l;
            if (colon == std::string::npos || !ToU32(t[k].substr(0, colon), v) ||
                !ToU32(t[k].substr(colon + 1), l) || l >= m_links.size())
            {
                err = at + "hop " + std::to_string(k - 3) + ": expected `node:link` with a link row below " +
                      std::to_string(m_links.size()) + ", found `" + t[k] + "`";
                return false;
            }
            const LinkSpec& spec = m_links[l];
            if (!((spec.a == u && spec.b == v) || (spec.b == u && spec.a == v)))
            {
                err = at + "hop " + std::to_string(k - 3) + ": link " + std::to_string(l) +
                      " does not join node " + std::to_string(u) + " and node " + std::to_string(v);
                return false;
            }
            const Port& port = spec.a == u ? m_linkPorts[l].atA : m_linkPorts[l].atB;
            if (!Routing(u)->AddPairRoute(a, b, ch, port.ifIndex, port.peer))
            {
                err = at + "node " + std::to_string(u) + " already routes channel " + t[3] + " of the pair " +
                      t[1] + " " + t[2] + " (a repeated connection or a path through a node twice)";
                return false;
            }
            // round trip: the hop's propagation both ways, one full data segment's
            // serialization (1,000 payload + 54 header bytes)
            DataRate rate(spec.rate);
            bottleneck = std::min<uint64_t>(bottleneck, rate.GetBitRate());
            rttNs += 2 * Time(spec.delay).GetNanoSeconds() +
                     rate.CalculateBytesTxTime(1054).GetNanoSeconds();
            u = v;
        }
        dag.pairBdp[{a, b, ch}] = uint64_t(double(bottleneck) / 8e9 * double(rttNs));
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
    dag.roceApps.assign(NodeCount(), nullptr);
    const DcqcnConfig& c = m_roce.dcqcn;
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
            if (dag.params.transport == Transport::Roce)
            {
                Ptr<Ina3dRoceApplication> roce = CreateObject<Ina3dRoceApplication>();
                roce->SetAttribute("EwmaGain", DoubleValue(c.ewmaGain));
                roce->SetAttribute("AlphaResumeInterval", TimeValue(NanoSeconds(c.alphaResumeNs)));
                roce->SetAttribute("RateDecreaseInterval", TimeValue(NanoSeconds(c.rateDecreaseNs)));
                roce->SetAttribute("RpTimer", TimeValue(NanoSeconds(c.rpTimerNs)));
                roce->SetAttribute("FastRecoveryTimes", UintegerValue(c.fastRecoveryTimes));
                roce->SetAttribute("RateAi", DataRateValue(DataRate(c.rateAiBps)));
                roce->SetAttribute("RateHai", DataRateValue(DataRate(c.rateHaiBps)));
                roce->SetAttribute("MinRate", DataRateValue(DataRate(c.minRateBps)));
                roce->SetAttribute("ClampTargetRate", BooleanValue(c.clampTargetRate));
                roce->SetAttribute("ByteCounter", UintegerValue(c.byteCounter));
                roce->SetAttribute("Payload", UintegerValue(dag.params.tcpSegment));
                m_nodes.Get(n)->AddApplication(roce);
                dag.roceApps[n] = roce;
                if (dag.params.rateLog)
                    roce->TraceConnectWithoutContext("RateChange",
                                                     MakeBoundCallback(&Dag::RecordRate, n));
                apps.Add(roce);
            }
        }
        else if (aggregates[n])
        {
            Ptr<InaSwitchApplication> app = CreateObject<InaSwitchApplication>();
            app->SetAttribute("Slots", UintegerValue(*dag.params.inaSlots));
            app->TraceConnectWithoutContext("SlotsInUse",
                                            MakeBoundCallback(&Dag::RecordSlots, n));
            m_nodes.Get(n)->AddApplication(app);
            dag.switchApps[n] = app;
            apps.Add(app);
        }
    }
    apps.Start(Seconds(0));
    return apps;
}

} // namespace ns3
