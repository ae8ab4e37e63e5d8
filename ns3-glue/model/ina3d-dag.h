/*
 * ina3d glue for stock ns-3.37: the closed-loop DAG of trace records.
 *
 * The Dag owns every record of an ina3d trace (trace.txt) and releases each one when its
 * dependencies have completed plus its gap. It does not move bytes itself: Net and INA
 * records are handed to the InaHostApplication / InaSwitchApplication of their nodes,
 * which call Dag::Finish when the receiver has the last byte.
 */
#ifndef INA3D_DAG_H
#define INA3D_DAG_H

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/internet-module.h"

#include "ina3d-link-monitor.h"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace ns3
{

class InaHostApplication;
class InaSwitchApplication;
class Ina3dRoceApplication;

/** How net records travel (params.txt TRANSPORT). */
enum class Transport
{
    Roce, //!< RoCE-like queue pairs with DCQCN over ECN-marking switches (Ina3dRoceApplication)
    Tcp,  //!< TCP NewReno over drop-tail queues (InaHostApplication)
};

/** How a record consumes time (mirrors ina3d's trace::Mode). */
enum class RecMode
{
    Net,
    Ina,
    NvLink,
    Compute
};

/** One trace record plus its run-time state. */
struct DagRecord
{
    uint64_t id = 0;
    uint32_t src = 0;
    uint32_t dst = 0;
    uint64_t bytes = 0;
    uint64_t gapNs = 0;
    uint64_t durNs = 0;
    RecMode mode = RecMode::Net;
    std::string cls;
    uint32_t channel = 0; //!< NCCL channel: a Net record travels on connection (src, dst, channel)
    uint64_t standaloneNs = 0;
    bool hasAgg = false;
    uint64_t aggId = 0;
    uint32_t aggSwitch = 0;
    uint32_t fanin = 0;
    bool up = false;
    std::vector<uint32_t> deps;       //!< indices of deps that gate this record
    std::vector<uint32_t> dependents; //!< indices gated by this record
    uint32_t pending = 0;             //!< gating deps not yet finished
    bool coupled = false;  //!< INA edge sent by a switch: moves as its aggregation produces data
    bool opened = false;   //!< coupled edge whose outside deps are done (may carry data)
    int64_t startNs = -1;
    int64_t endNs = -1;
    uint64_t delivered = 0; //!< payload bytes the receiver got
};

/** One aggregation as seen from one switch. */
struct AggAtSwitch
{
    uint32_t fanin = 0;
    std::vector<uint32_t> childUp; //!< up records into this switch
    int32_t parentUp = -1;         //!< up record from this switch to its parent (-1: root)
    std::vector<uint32_t> down;    //!< down records from this switch
    int32_t parentDown = -1;       //!< down record into this switch
};

/**
 * The slot policy's answer to an aggregation, for every switch of its tree at once
 * (InaSlotAdmission; docs/model.md#slot-policies).
 */
enum class Admission
{
    Pending,  //!< some worker has not started yet: not asked
    Waiting,  //!< asked, refused for now (static, priority, planned): workers send nothing
    Granted,  //!< `slots` reserved on every switch of the tree: workers keep `slots` in flight
    Fallback, //!< refused for good (best-effort): the workers run a host ring instead
};

/** One aggregation (all edges with one agg id). */
struct AggInfo
{
    uint64_t bytes = 0;
    uint32_t packets = 0;
    uint64_t workerWeight = 0; //!< sum over workers of (node+1): the root's expected sum factor
    std::vector<uint32_t> ring; //!< workers in the order of their up edges: the fallback ring
    uint32_t ringsDone = 0;     //!< fallback ring members that received every step
    uint32_t priority = 0;     //!< lower is served first under the priority policy
    std::map<uint32_t, AggAtSwitch> switches;
    std::map<uint32_t, uint32_t> workerUp;   //!< worker node -> its up record
    std::map<uint32_t, uint32_t> workerDown; //!< worker node -> its down record
    Admission admission = Admission::Pending;
    uint32_t slots = 0;            //!< w on every switch of the tree, once granted
    uint32_t workersStarted = 0;   //!< workers whose up edge has started
    uint32_t workersDone = 0;      //!< workers that received their last result
    int64_t askedNs = -1;          //!< when the aggregation asked for its slots
};

/** Run parameters (params.txt). */
struct GlueParams
{
    /** INA_SLOTS: aggregator slots per switch. No default here: ina3d writes the one
     *  default into params.txt, and ReadParams refuses a file without the key. */
    std::optional<uint32_t> inaSlots;
    uint32_t inaPayload = 1024;
    uint32_t inaWindow = 256;
    std::string inaPolicy = "best-effort";
    /** Traffic classes INA is enabled for, in priority order (static shares, priority order). */
    std::vector<std::string> inaClasses = {"tp", "dp", "emb"};
    Transport transport = Transport::Roce;
    uint32_t tcpSegment = 1000;
    uint32_t tcpBuffer = 8 << 20; //!< TCP receive buffer, bytes (TCP_BUFFER)
    double tcpWindowBdps = 2;     //!< a connection's send buffer in its path's BDPs (TCP_WINDOW_BDPS)
    uint32_t tcpInitialCwnd = 1024; //!< segments; see TCP_INITIAL_CWND in params.txt
    uint32_t mtu = 1500;
    uint32_t queuePackets = 100000;
    std::string flavor = "hpcc";
    bool persistentTcp = true; //!< one TCP connection per (src, dst) pair, flows in FIFO order
    double stopTimeS = 1000.0;
    bool rateLog = false; //!< RATE_LOG 1: write every DCQCN rate change to rates.csv
};

/**
 * The trace DAG and its closed-loop scheduler (a singleton: one scenario per process).
 */
class Dag
{
  public:
    static Dag& Get();

    /** Reads trace.txt; returns false with a message naming file and line on bad input. */
    bool Load(const std::string& path, uint32_t nodeCount, const std::vector<bool>& isSwitch,
              std::string& err);

    /** Schedules every record without deps. */
    void Begin();
    /** Called by apps when a Net/INA record has moved its last byte (or by timers). */
    void Finish(uint32_t idx);
    /**
     * `bytes` more of the byte stream of connection (src, dst, channel) reached dst: the
     * connection's records, in the order they were handed to the transport, take them and
     * finish when whole.
     */
    void Deliver(uint32_t src, uint32_t dst, uint32_t channel, uint64_t bytes);
    /** Marks the start of a coupled record when it sends its first packet. */
    void MarkStart(uint32_t idx);

    std::vector<DagRecord> records;
    std::map<uint64_t, AggInfo> aggs;
    GlueParams params;
    std::vector<Ptr<InaHostApplication>> hostApps;    //!< by node id (null for switches)
    std::vector<Ptr<InaSwitchApplication>> switchApps; //!< by node id (null when not aggregating)
    std::vector<Ptr<Ina3dRoceApplication>> roceApps;   //!< by node id (TRANSPORT roce, hosts)
    std::map<std::pair<uint32_t, uint16_t>, uint32_t> tcpFlowByPort; //!< (src node, port) -> record
    /** A connection: (src node, dst node, NCCL channel). */
    typedef std::tuple<uint32_t, uint32_t, uint32_t> Conn;
    std::map<Conn, std::deque<uint32_t>> pairFifo; //!< connection -> records in send order
    std::map<uint32_t, uint32_t> nodeOfAddress;                      //!< IPv4 (host order) -> node
    /** Bandwidth-delay product of each routed connection, bytes (routes.txt and the links). */
    std::map<Conn, uint64_t> pairBdp;
    std::vector<Ipv4Address> nodeAddress;                            //!< identity address per node
    uint64_t finished = 0;
    uint64_t sumErrors = 0;
    uint64_t fallbackPackets = 0; //!< data packets sent by fallback rings
    uint64_t slotPeak = 0;
    uint64_t slotTime = 0; //!< slot·ns summed over switches (w × held time per stream)
    /** One change of a switch's slots in use (switches.csv, the replayer's schema). */
    struct SlotSample
    {
        int64_t timeNs;
        uint32_t node;
        uint32_t inUse;
    };
    std::vector<SlotSample> slotSamples;
    /** rates.csv rows (RATE_LOG 1): time_ns,src,dst,rate_bps,target_bps,alpha,event. */
    std::ostringstream rateLog;
    /** Trace sink of Ina3dRoceApplication's RateChange. */
    static void RecordRate(uint32_t src, uint32_t dst, uint64_t rate, uint64_t target, double alpha,
                           const char* event);
    /** Trace sink of InaSwitchApplication's SlotsInUse. */
    static void RecordSlots(uint32_t node, uint32_t oldValue, uint32_t newValue);
    uint64_t protocolErrors = 0;
    /** Frames each channel really carried, and drops (see LinkMonitor). */
    LinkMonitor links;
    /** (aggregation, switch) -> slots its group reserves there (planned INA policy). */
    std::map<std::pair<uint64_t, uint32_t>, uint32_t> reservations;

    /**
     * Writes fct.csv, fct.txt, stats.txt, links.csv, links_control.csv (all complete) or
     * fct.partial.csv; returns true when complete.
     */
    bool WriteOutputs(const std::string& dir, double wallSeconds);

  private:
    void Ready(uint32_t idx);
    void Start(uint32_t idx);
    void Open(uint32_t idx);
    void Progress();
    std::map<uint64_t, uint32_t> m_index;
    uint64_t m_lastProgress = 0;
};

} // namespace ns3

#endif
