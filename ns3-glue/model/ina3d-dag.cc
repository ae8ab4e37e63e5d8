/*
 * ina3d glue: the closed-loop DAG scheduler and the output writers.
 */
#include "ina3d-dag.h"

#include "ina-apps.h"
#include "ina3d-roce.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Ina3dDag");

Dag&
Dag::Get()
{
    static Dag dag;
    return dag;
}

static bool
ParseU64(const std::string& s, uint64_t& v)
{
    if (s.empty())
    {
        return false;
    }
    char* end = nullptr;
    errno = 0;
    unsigned long long x = std::strtoull(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || s[0] == '-')
    {
        return false;
    }
    v = x;
    return true;
}

static uint32_t
ClassPriority(const std::vector<std::string>& order, const std::string& c)
{
    // Position in INA_CLASSES (the trace's `ina_classes`, priority order); unlisted last.
    auto it = std::find(order.begin(), order.end(), c);
    return it - order.begin();
}

/** Gap and duration bound: far below ns-3's picosecond clock's 2^63 ps (about 106 days). */
static const uint64_t MAX_TIME_NS = 1000000000000000ull; // 10^15 ns, 11.6 days
/** Bytes bound, the trace reader's (src/formats/trace_csv/read.rs, MAX_RECORD_VALUE):
 * 2^50, a pebibyte; far more would take the simulator years of simulated time. */
static const uint64_t MAX_BYTES = uint64_t(1) << 50;
/** Records are indexed in 32 bits (and as int32 parents). */
static const uint64_t MAX_RECORDS = uint64_t(INT32_MAX);

bool
Dag::Load(const std::string& path, uint32_t nodeCount, const std::vector<bool>& isSwitch,
          std::string& err)
{
    std::ifstream in(path);
    if (!in)
    {
        err = path + ": cannot open";
        return false;
    }
    std::string line;
    uint64_t lineNo = 0;
    uint64_t expected = 0;
    bool haveHeader = false;
    // Fields before the deps: version 3 adds agg_group after agg_dir (the glue takes each
    // aggregation's slots from reservations.txt by its id, so it only checks the field);
    // a file without a version comment is read as version 2.
    size_t fixed = 15;
    std::vector<std::vector<uint64_t>> rawDeps;
    auto fail = [&](const std::string& what) {
        err = path + ":" + std::to_string(lineNo) + ": " + what;
        return false;
    };
    while (std::getline(in, line))
    {
        lineNo++;
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        if (line == "# ina3d-ns3 trace v1")
            return fail("a version 1 glue trace (no NCCL channel field): emit it again with `ina3d ns3 emit`");
        if (!haveHeader && line == "# ina3d-ns3 trace v3")
            fixed = 16;
        else if (!haveHeader && line == "# ina3d-ns3 trace v2")
            fixed = 15;
        if (line.empty() || line[0] == '#')
            continue;
        std::istringstream ss(line);
        std::vector<std::string> t;
        std::string tok;
        while (ss >> tok)
            t.push_back(tok);
        if (t.empty())
            continue;
        if (!haveHeader)
        {
            if (t.size() != 2 || t[0] != "RECORDS" || !ParseU64(t[1], expected))
                return fail("expected `RECORDS <count>`");
            haveHeader = true;
            continue;
        }
        if (t.size() < fixed)
            return fail("expected at least " + std::to_string(fixed) + " fields, found " +
                        std::to_string(t.size()));
        DagRecord r;
        uint64_t v;
        const char* names[] = {"id", "src", "dst", "bytes", "gap_ns", "dur_ns"};
        uint64_t vals[6];
        for (int i = 0; i < 6; i++)
        {
            if (!ParseU64(t[i], vals[i]))
                return fail(std::string("field ") + names[i] + ": not an unsigned integer: " + t[i]);
        }
        // Every field is read as 64 bits and range-checked before it is narrowed: a node id
        // of 2^32 + 1 must not become node 1.
        for (int i = 1; i <= 2; i++)
            if (vals[i] >= nodeCount)
                return fail(std::string("field ") + names[i] + ": node " + t[i] +
                            " is not in the topology (" + std::to_string(nodeCount) + " nodes)");
        for (int i = 4; i <= 5; i++)
            if (vals[i] > MAX_TIME_NS)
                return fail(std::string("field ") + names[i] + ": " + t[i] +
                            " ns is beyond the simulator's clock (at most " +
                            std::to_string(MAX_TIME_NS) + " ns)");
        if (vals[3] > MAX_BYTES)
            return fail(std::string("field bytes: ") + t[3] + " bytes is more than any record carries (at most 2^50 = " +
                        std::to_string(MAX_BYTES) + ")");
        if (records.size() >= MAX_RECORDS)
            return fail("more than " + std::to_string(MAX_RECORDS) + " records");
        r.id = vals[0];
        r.src = uint32_t(vals[1]);
        r.dst = uint32_t(vals[2]);
        r.bytes = vals[3];
        r.gapNs = vals[4];
        r.durNs = vals[5];
        if (t[6] == "net")
            r.mode = RecMode::Net;
        else if (t[6] == "ina")
            r.mode = RecMode::Ina;
        else if (t[6] == "nvlink")
            r.mode = RecMode::NvLink;
        else if (t[6] == "compute")
            r.mode = RecMode::Compute;
        else
            return fail("field mode: unknown `" + t[6] + "`");
        r.cls = t[7];
        uint64_t channel;
        if (!ParseU64(t[8], channel) || channel > UINT32_MAX)
            return fail("field channel: not an NCCL channel number (32 bits): " + t[8]);
        if (channel != 0 && r.mode != RecMode::Net)
            return fail("field channel: only net records run on NCCL channels, this " + t[6] +
                        " record names channel " + t[8]);
        r.channel = uint32_t(channel);
        if (!ParseU64(t[9], r.standaloneNs))
            return fail("field standalone_ns: not an unsigned integer");
        if (t[10] != "-")
        {
            r.hasAgg = true;
            uint64_t sw, fanin;
            if (!ParseU64(t[10], r.aggId) || !ParseU64(t[11], sw) || !ParseU64(t[12], fanin))
                return fail("agg fields: expected `agg_id switch fanin up|down`");
            if (sw >= nodeCount)
                return fail("field agg_switch: node " + t[11] + " is not in the topology (" +
                            std::to_string(nodeCount) + " nodes)");
            if (fanin >= nodeCount)
                return fail("field agg_fanin: " + t[12] + " is more than the topology's " +
                            std::to_string(nodeCount) + " nodes");
            // an aggregation's packets are counted in 32 bits
            if (vals[3] / std::max<uint32_t>(1, params.inaPayload) >= UINT32_MAX)
                return fail("field bytes: " + t[3] + " bytes is more INA packets than 2^32");
            r.aggSwitch = uint32_t(sw);
            r.fanin = uint32_t(fanin);
            if (t[13] == "up")
                r.up = true;
            else if (t[13] == "down")
                r.up = false;
            else
                return fail("field agg_dir: expected up or down");
            if (fixed == 16 && t[14] != "dense" && t[14] != "expert")
                return fail("field agg_group: expected dense or expert, found `" + t[14] + "`");
        }
        else if (fixed == 16 && t[14] != "-")
            return fail("field agg_group: `" + t[14] + "` on a record outside an aggregation");
        if (r.mode == RecMode::Ina && !r.hasAgg)
            return fail("ina record without aggregation fields");
        uint64_t nd;
        if (!ParseU64(t[fixed - 1], nd) || t.size() != fixed + nd)
            return fail("field ndeps: does not match the number of deps on the line");
        std::vector<uint64_t> ds;
        for (uint64_t i = 0; i < nd; i++)
        {
            if (!ParseU64(t[fixed + i], v))
                return fail("dep: not an unsigned integer");
            ds.push_back(v);
        }
        if (m_index.count(r.id))
            return fail("duplicate record id " + std::to_string(r.id));
        m_index[r.id] = records.size();
        r.coupled = r.mode == RecMode::Ina && isSwitch[r.src];
        records.push_back(r);
        rawDeps.push_back(ds);
    }
    if (!haveHeader)
        return fail("missing `RECORDS <count>` header");
    if (expected != records.size())
    {
        err = path + ": header says " + std::to_string(expected) + " records, file has " +
              std::to_string(records.size());
        return false;
    }
    // Aggregations.
    for (uint32_t i = 0; i < records.size(); i++)
    {
        DagRecord& r = records[i];
        if (r.mode != RecMode::Ina)
            continue;
        AggInfo& a = aggs[r.aggId];
        if (a.bytes == 0)
            a.bytes = r.bytes;
        if (a.bytes != r.bytes)
        {
            err = path + ": aggregation " + std::to_string(r.aggId) +
                  ": edges carry different byte counts";
            return false;
        }
        a.priority = ClassPriority(params.inaClasses, r.cls);
        if (r.up)
        {
            AggAtSwitch& s = a.switches[r.aggSwitch];
            s.fanin = r.fanin;
            s.childUp.push_back(i);
            if (isSwitch[r.src])
                a.switches[r.src].parentUp = i;
            else
            {
                // the replayer's fallback ring: workers in the order of their up edges
                if (!a.workerUp.count(r.src))
                    a.ring.push_back(r.src);
                a.workerUp[r.src] = i;
            }
        }
        else
        {
            a.switches[r.src].down.push_back(i);
            if (isSwitch[r.dst])
                a.switches[r.dst].parentDown = i;
            else
                a.workerDown[r.dst] = i;
        }
    }
    for (auto& [id, a] : aggs)
    {
        a.packets = (a.bytes + params.inaPayload - 1) / params.inaPayload;
        for (auto& [w, up] : a.workerUp)
        {
            a.workerWeight += w + 1;
            if (!a.workerDown.count(w))
            {
                err = path + ": aggregation " + std::to_string(id) + ": worker " +
                      std::to_string(w) + " sends up but receives no result (no down edge)";
                return false;
            }
        }
        for (auto& [sw, s] : a.switches)
        {
            if (!isSwitch[sw])
            {
                err = path + ": aggregation " + std::to_string(id) + ": node " +
                      std::to_string(sw) + " aggregates but is not a switch";
                return false;
            }
            if (s.childUp.size() != s.fanin)
            {
                err = path + ": aggregation " + std::to_string(id) + ": switch " +
                      std::to_string(sw) + " has fan-in " + std::to_string(s.fanin) + " but " +
                      std::to_string(s.childUp.size()) + " up edges";
                return false;
            }
        }
    }
    // Dependencies: a coupled edge is gated only by deps outside its own aggregation; its
    // data moves as the aggregation produces it.
    for (uint32_t i = 0; i < records.size(); i++)
    {
        for (uint64_t d : rawDeps[i])
        {
            auto it = m_index.find(d);
            if (it == m_index.end())
            {
                err = path + ": record " + std::to_string(records[i].id) + " depends on unknown record " +
                      std::to_string(d);
                return false;
            }
            DagRecord& dep = records[it->second];
            if (records[i].coupled && dep.hasAgg && dep.aggId == records[i].aggId)
                continue;
            records[i].deps.push_back(it->second);
            dep.dependents.push_back(i);
            records[i].pending++;
        }
    }
    return true;
}

void
Dag::Begin()
{
    for (uint32_t i = 0; i < records.size(); i++)
    {
        if (records[i].pending == 0)
            Ready(i);
    }
}

void
Dag::Ready(uint32_t idx)
{
    const DagRecord& r = records[idx];
    if (r.coupled)
        Simulator::Schedule(NanoSeconds(r.gapNs), &Dag::Open, this, idx);
    else
        Simulator::Schedule(NanoSeconds(r.gapNs), &Dag::Start, this, idx);
}

void
Dag::Open(uint32_t idx)
{
    records[idx].opened = true;
    Ptr<InaSwitchApplication> sw = switchApps[records[idx].src];
    if (sw)
        sw->EdgeOpened(idx);
}

void
Dag::MarkStart(uint32_t idx)
{
    if (records[idx].startNs < 0)
        records[idx].startNs = Simulator::Now().GetNanoSeconds();
}

void
Dag::Start(uint32_t idx)
{
    DagRecord& r = records[idx];
    r.startNs = Simulator::Now().GetNanoSeconds();
    switch (r.mode)
    {
    case RecMode::Compute:
    case RecMode::NvLink:
        Simulator::Schedule(NanoSeconds(r.durNs), &Dag::Finish, this, idx);
        break;
    case RecMode::Net:
        if (r.bytes == 0 || r.src == r.dst)
        {
            r.delivered = r.bytes;
            Finish(idx);
        }
        else if (params.transport == Transport::Roce)
            roceApps[r.src]->StartFlow(idx);
        else
            hostApps[r.src]->StartFlow(idx);
        break;
    case RecMode::Ina:
        if (!r.up)
        {
            // A down edge sent by a host is malformed; Load only lets hosts send up edges
            // through StartIna.
            protocolErrors++;
            return;
        }
        hostApps[r.src]->StartIna(idx);
        break;
    }
}

void
Dag::Finish(uint32_t idx)
{
    DagRecord& r = records[idx];
    if (r.endNs >= 0)
        return;
    if (r.startNs < 0)
        r.startNs = Simulator::Now().GetNanoSeconds();
    r.endNs = Simulator::Now().GetNanoSeconds();
    if (r.mode == RecMode::Compute || r.mode == RecMode::NvLink)
        r.delivered = r.bytes;
    finished++;
    for (uint32_t d : r.dependents)
    {
        if (--records[d].pending == 0)
            Ready(d);
    }
    Progress();
    // Nothing the outputs measure happens after the last record: transport timers (DCQCN
    // recovery, TCP's FIN exchange) would only keep the simulator busy.
    if (finished == records.size())
        Simulator::Stop();
}

void
Dag::Deliver(uint32_t src, uint32_t dst, uint32_t channel, uint64_t bytes)
{
    std::deque<uint32_t>& fifo = pairFifo[{src, dst, channel}];
    while (bytes > 0 && !fifo.empty())
    {
        DagRecord& r = records[fifo.front()];
        uint64_t take = std::min<uint64_t>(bytes, r.bytes - r.delivered);
        r.delivered += take;
        bytes -= take;
        if (r.delivered == r.bytes)
        {
            uint32_t done = fifo.front();
            fifo.pop_front();
            Finish(done);
        }
    }
    if (bytes > 0)
        protocolErrors++; // more bytes than the records sent on this connection
}

void
Dag::Progress()
{
    uint64_t total = records.size();
    uint64_t step = std::max<uint64_t>(1, total / 100);
    if (finished == total || finished - m_lastProgress >= step)
    {
        m_lastProgress = finished;
        std::cerr << "progress " << finished << " " << total << " "
                  << Simulator::Now().GetNanoSeconds() << std::endl;
    }
}

void
Dag::RecordRate(uint32_t src, uint32_t dst, uint64_t rate, uint64_t target, double alpha,
                const char* event)
{
    char a[32];
    std::snprintf(a, sizeof a, "%.17g", alpha);
    Get().rateLog << Simulator::Now().GetNanoSeconds() << "," << src << "," << dst << "," << rate
                  << "," << target << "," << a << "," << event << "\n";
}

void
Dag::RecordSlots(uint32_t node, uint32_t, uint32_t newValue)
{
    Get().slotSamples.push_back(SlotSample{Simulator::Now().GetNanoSeconds(), node, newValue});
}

static std::string
HpccIp(uint32_t node)
{
    // HPCC's host address rule, so that tools reading fct.txt recover node ids.
    uint32_t ip = 0x0b000001u + ((node / 256) << 16) + ((node % 256) << 8);
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", ip);
    return buf;
}

static const char*
ModeName(RecMode m)
{
    switch (m)
    {
    case RecMode::Net:
        return "net";
    case RecMode::Ina:
        return "ina";
    case RecMode::NvLink:
        return "nvlink";
    case RecMode::Compute:
        return "compute";
    }
    return "?";
}

static void
WriteFctCsv(const std::string& path, const std::vector<DagRecord>& records)
{
    std::ofstream o(path);
    o << "flow_id,src,dst,mode,class,size_bytes,start_ns,end_ns,fct_ns,standalone_fct_ns\n";
    for (const DagRecord& r : records)
    {
        if (r.endNs < 0)
            continue;
        o << r.id << "," << r.src << "," << r.dst << "," << ModeName(r.mode) << "," << r.cls << ","
          << r.delivered << "," << r.startNs << "," << r.endNs << "," << (r.endNs - r.startNs)
          << "," << r.standaloneNs << "\n";
    }
}

bool
Dag::WriteOutputs(const std::string& dir, double wallSeconds)
{
    bool complete = finished == records.size() && protocolErrors == 0 && sumErrors == 0;
    int64_t makespan = 0;
    for (const DagRecord& r : records)
        makespan = std::max<int64_t>(makespan, r.endNs);
    if (!complete)
    {
        WriteFctCsv(dir + "/fct.partial.csv", records);
        std::cerr << "incomplete: " << finished << " of " << records.size()
                  << " records finished; protocol errors " << protocolErrors
                  << "; INA sum errors " << sumErrors << std::endl;
        for (const DagRecord& r : records)
        {
            if (r.endNs < 0)
            {
                std::cerr << "first unfinished record: " << r.id << " (" << ModeName(r.mode)
                          << " " << r.src << "->" << r.dst << ", " << r.pending
                          << " deps pending, " << r.delivered << "/" << r.bytes << " bytes)"
                          << std::endl;
                break;
            }
        }
        std::string waiting = InaSlotAdmission::Get().Waiting();
        if (!waiting.empty())
            std::cerr << "aggregations still waiting for slots: " << waiting << std::endl;
        return false;
    }
    WriteFctCsv(dir + "/fct.csv.tmp", records);
    links.WriteCsv(dir + "/links.csv.tmp", makespan, false);
    links.WriteCsv(dir + "/links_control.csv.tmp", makespan, true);
    {
        std::ofstream o(dir + "/switches.csv.tmp");
        o << "time_ns,switch,slots_in_use\n";
        for (const SlotSample& x : slotSamples)
            o << x.timeNs << "," << x.node << "," << x.inUse << "\n";
    }
    {
        std::ofstream o(dir + "/fct.txt.tmp");
        uint32_t n = 0;
        for (const DagRecord& r : records)
        {
            if (r.mode != RecMode::Net && r.mode != RecMode::Ina)
                continue;
            if (params.flavor == "parsimon")
                o << r.id << " ";
            o << HpccIp(r.src) << " " << HpccIp(r.dst) << " " << (10000 + n % 50000) << " 100 "
              << r.delivered << " " << r.startNs << " " << (r.endNs - r.startNs) << " "
              << r.standaloneNs << "\n";
            n++;
        }
    }
    {
        std::ofstream o(dir + "/stats.txt.tmp");
        o << "records " << records.size() << "\n";
        o << "finished " << finished << "\n";
        o << "makespan_ns " << makespan << "\n";
        o << "ina_slot_peak " << slotPeak << "\n";
        o << "ina_slot_time " << slotTime << "\n";
        o << "ina_fallback_packets " << fallbackPackets << "\n";
        o << "ina_sum_errors " << sumErrors << "\n";
        // Header bytes of each net-record data frame on the wire, which links.csv is compared
        // with the replayer's 48 through: RoCE header 18, UDP 8, IPv4 20, PPP 2; or TCP with
        // timestamps 32, IPv4 20, PPP 2.
        o << "net_header_bytes " << (params.transport == Transport::Roce ? 48 : 54) << "\n";
        uint64_t cnps = 0;
        for (const Ptr<Ina3dRoceApplication>& a : roceApps)
            cnps += a ? a->CnpsSent() : 0;
        o << "cnps_sent " << cnps << "\n";
        o << "dropped_packets " << links.Drops() << "\n";
        // the deepest any one egress queue got, and what one holds before it drops
        o << "peak_queue_bytes " << links.PeakQueueBytes() << "\n";
        o << "peak_queue_packets " << links.PeakQueuePackets() << "\n";
        o << "queue_capacity_packets " << params.queuePackets << "\n";
        o << "wall_time_ns " << (uint64_t)(wallSeconds * 1e9) << "\n";
    }
    std::vector<std::string> files = {"fct.csv",   "fct.txt",           "stats.txt",
                                      "links.csv", "links_control.csv", "switches.csv"};
    if (params.rateLog)
    {
        std::ofstream o(dir + "/rates.csv.tmp");
        o << "time_ns,src,dst,rate_bps,target_bps,alpha,event\n" << rateLog.str();
        files.push_back("rates.csv");
    }
    for (const std::string& f : files)
        std::rename((dir + "/" + f + ".tmp").c_str(), (dir + "/" + f).c_str());
    std::ofstream done(dir + "/done");
    done << "complete " << records.size() << "\n";
    return true;
}

} // namespace ns3
