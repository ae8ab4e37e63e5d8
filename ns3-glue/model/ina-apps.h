/*
 * ina3d glue for stock ns-3.37: the two application roles.
 *
 * InaHostApplication (one per GPU host): sends and sinks the TCP flows of Net records,
 * streams INA up edges as UDP packets with a window of outstanding slots (the w slots
 * granted to its aggregation), receives INA results, and runs its part of the host ring
 * of aggregations that fell back (best-effort).
 *
 * InaSlotAdmission: the slot policy, one decision per aggregation for its whole tree.
 *
 * InaSwitchApplication (one per aggregating switch): a pool of aggregator slots, per
 * (aggregation, sequence) summing of its fan-in children's packets, partial results sent
 * up to the parent switch, the root sending results back down the tree.
 */
#ifndef INA3D_APPS_H
#define INA3D_APPS_H

#include "ina3d-dag.h"

#include "ns3/applications-module.h"

#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace ns3
{

/** Application-level header carried at the start of every INA UDP payload. */
struct InaWire
{
    uint32_t type;  //!< one of InaWire::Type
    uint32_t from;  //!< sending node
    uint64_t agg;   //!< aggregation id
    uint32_t seq;   //!< slot sequence number within the aggregation
    uint32_t len;   //!< data bytes this packet stands for (not counting this header)
    uint64_t value; //!< the summed value (a stand-in for the payload's vector)
    uint32_t step;  //!< fallback ring: the step a RING_DATA packet belongs to
    uint32_t pad;

    enum Type : uint32_t
    {
        DATA = 1,      //!< child -> aggregating switch
        RESULT = 2,    //!< switch -> child (down the tree)
        RING_DATA = 3, //!< fallback ring: worker -> its successor
        RING_ACK = 4,  //!< fallback ring: successor -> worker, one per RING_DATA
    };
};

/**
 * Carries an InaWire with the packet as an ns-3 packet tag: simulation bookkeeping that
 * occupies no bytes on the wire. On the wire an INA packet is INA_HEADER_BYTES of INA
 * header plus `len` data bytes.
 */
class InaTag : public Tag
{
  public:
    static TypeId GetTypeId();
    TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(TagBuffer i) const override;
    void Deserialize(TagBuffer i) override;
    void Print(std::ostream& os) const override;
    InaWire wire{};
};

/**
 * INA header bytes on the wire: with UDP (8), IPv4 (20) and PPP (2) a packet carries 48
 * bytes of headers, the per-packet overhead the replayer counts (docs/model.md#wire-bytes) and close
 * to SwitchML's and ATP's headers.
 */
static const uint32_t INA_HEADER_BYTES = 18;

/**
 * IPv4 TOS of every INA packet: ECN-capable (ECT(0)), so an ECN queue disc marks it where
 * it would otherwise drop it early (INA's window protocol ignores the mark).
 */
static const uint8_t INA_ECT0 = 0x02;

/** UDP port of every INA endpoint. */
static const uint16_t INA_PORT = 5000;
/** TCP port every host's flow sink listens on. */
static const uint16_t FLOW_PORT = 10000;

/** Sends a packet carrying `w` plus `w.len` data bytes from `sock` to `to`. */
void InaSend(Ptr<Socket> sock, const InaWire& w, Ipv4Address to);

/** Host role: TCP flows, INA worker, fallback ring member. */
class InaHostApplication : public Application
{
  public:
    static TypeId GetTypeId();
    InaHostApplication();
    ~InaHostApplication() override;

    /** Starts the TCP flow of Net record `idx` (this node is its source). */
    void StartFlow(uint32_t idx);
    /** Starts the INA up edge `idx` (this node is the worker): its aggregation asks for
     * slots once every worker has started. */
    void StartIna(uint32_t idx);
    /** The slot policy answered `agg` (granted or fell back): the worker may send. */
    void Admitted(uint64_t agg);

  private:
    void StartApplication() override;
    void StopApplication() override;

    /** Bounds a new connection to `dst` on `channel`: send buffer and initial window (TCP_WINDOW_BDPS). */
    void BoundWindow(Ptr<Socket> s, uint32_t dst, uint32_t channel);
    /** Binds `s` to this node's identity address and registers its port as `channel`'s. */
    uint16_t BindChannel(Ptr<Socket> s, uint32_t channel);
    void HandleAccept(Ptr<Socket> s, const Address& from);
    void HandleRead(Ptr<Socket> s);
    void HandleSend(Ptr<Socket> s, uint32_t available);
    void ConnectOk(Ptr<Socket> s);
    void ConnectFail(Ptr<Socket> s);
    void HandleUdp(Ptr<Socket> s);
    void PumpIna(uint64_t agg);
    /** Starts this worker's part of `agg`'s fallback ring. */
    void StartRing(uint64_t agg);
    /** Sends what the ring's window and the received steps allow. */
    void PumpRing(uint64_t agg);
    void OnRingData(const InaWire& w);
    void OnRingAck(const InaWire& w);

    struct TxFlow
    {
        uint32_t idx;
        uint64_t sent;
    };
    struct Worker
    {
        uint32_t upIdx = 0;
        uint32_t nextSeq = 0;
        uint32_t results = 0;
    };
    /**
     * This worker's part of a fallback ring all-reduce (the replayer's host ring): 2(n-1)
     * steps, each one chunk of ceil(S/n) bytes to the successor in packets of the host
     * payload; step s leaves only once step s-1 has arrived whole from the predecessor.
     * Packets are acknowledged one by one and at most `window` are unacknowledged.
     */
    struct RingPart
    {
        uint32_t succ = 0;
        uint32_t steps = 0;     //!< 2(n-1)
        uint64_t chunk = 0;     //!< ceil(S/n) bytes
        uint32_t perStep = 0;   //!< packets per step
        uint32_t window = 0;    //!< packets unacknowledged at most
        uint32_t step = 0;      //!< the step being sent
        uint32_t sentInStep = 0;
        uint64_t sent = 0;      //!< packets sent, all steps
        uint64_t acked = 0;     //!< packets acknowledged
        std::vector<uint32_t> got; //!< packets received from the predecessor per step
        bool done = false;         //!< every step arrived from the predecessor
    };
    uint32_t m_node = 0;
    Ptr<Socket> m_listen;
    Ptr<Socket> m_udp;
    std::map<Ptr<Socket>, TxFlow> m_tx;
    std::map<Ptr<Socket>, uint32_t> m_rx;
    struct Conn
    {
        Ptr<Socket> sock;
        bool connected = false;
        uint64_t queued = 0; //!< bytes of all records handed to this connection
        uint64_t sent = 0;   //!< bytes accepted by the socket
    };
    /** (node, NCCL channel): a persistent connection's peer. */
    typedef std::pair<uint32_t, uint32_t> Peer;
    std::map<Peer, Conn> m_conns;             //!< persistent connections by (destination, channel)
    std::map<Ptr<Socket>, Peer> m_connDst;    //!< socket -> (destination node, channel)
    std::map<Ptr<Socket>, Peer> m_rxPair;     //!< accepted persistent socket -> (source node, channel)
    std::map<uint64_t, Worker> m_workers;
    std::map<uint64_t, RingPart> m_rings; //!< fallback rings this worker is in, by aggregation
};

/**
 * The slot policy (INA_POLICY), one decision per aggregation for its whole tree, as the
 * replayer's `Pools` decides it (docs/model.md#slot-policies): once every worker of an
 * aggregation has started, it asks for w = min(INA_WINDOW, packets, the pool it draws
 * from) slots on every aggregating switch of its tree, and gets them on all of them or on
 * none. A grant reserves the w slots on each switch until the aggregation ends (its last
 * worker has its last result, the replayer's unit end); a refusal waits (static,
 * priority, planned) or is final (best-effort: the aggregation runs the replayer's host
 * ring instead). Waiting aggregations are served, each
 * one whose slots are free, in the order (class rank under priority, arrival, id) every
 * time a reservation ends. Deciding for the whole tree at once means a stream never holds
 * slots at one switch while it waits at another, so waits cannot deadlock.
 *
 * The reservation is the policy's bookkeeping (SwitchML's and ATP's controller allocating
 * a job's aggregators); what a switch physically holds, and what switches.csv reports, is
 * each InaSwitchApplication's own interval, inside the reservation.
 */
class InaSlotAdmission
{
  public:
    static InaSlotAdmission& Get();

    /** Every worker of `agg` has started: asks the policy for its tree's slots (answered
     * once the events of this instant have run, with the other asks of the instant). */
    void Ask(uint64_t agg);
    /** `agg` has ended (its last worker has its last result): its reservation ends. */
    void Release(uint64_t agg);
    /** Aggregations still waiting, empty when none (a run that ends with waiting ones). */
    std::string Waiting() const;
    /** Reservations in force on switch `sw`, all classes. */
    uint32_t Reserved(uint32_t sw) const;

  private:
    /** w of `agg` and whether the policy grants it now. */
    Admission Decide(uint64_t agg, uint32_t& w) const;
    /** Slots of `sw`'s pool that `cls` may draw from (its share under static). */
    uint32_t Capacity(uint32_t sw, uint32_t cls) const;
    /** Of those, the ones not reserved now. */
    uint32_t Free(uint32_t sw, uint32_t cls) const;
    void Change(uint64_t agg, uint32_t w, bool take);
    /** Records the answer and lets the workers send. */
    void Admit(uint64_t agg, Admission answer, uint32_t w);
    void ServeWaiting();
    /** Answers the asks of this instant in aggregation-id order. */
    void AnswerAsks();

    std::map<uint32_t, std::map<uint32_t, uint32_t>> m_reserved; //!< switch -> class -> slots
    std::set<std::tuple<uint32_t, int64_t, uint64_t>> m_waiting; //!< (rank, asked, aggregation)
    std::set<uint64_t> m_asking; //!< aggregations that asked at this instant, not answered yet
};

/**
 * Switch role: the aggregator slot pool.
 *
 * One slot model (docs/model.md#slot-policies): an aggregation's stream at this switch
 * holds the w slots InaSlotAdmission granted its tree, from the arrival of its first
 * packet here until its last result packet leaves here downwards (the root multicasting
 * it, a non-root forwarding its parent's result; a root without down edges, Rina's rack
 * reduction: its last partial sum leaving upwards). Within them a sequence number takes
 * one slot at its first packet and gives it back when its result leaves. An aggregation
 * that fell back sends the switches nothing (its workers run a host ring).
 */
class InaSwitchApplication : public Application
{
  public:
    static TypeId GetTypeId();
    InaSwitchApplication();
    ~InaSwitchApplication() override;

    /** A coupled edge leaving this switch may now carry its queued packets. */
    void EdgeOpened(uint32_t idx);
    /** Slots in use right now. */
    uint32_t SlotsInUse() const
    {
        return m_inUse;
    }
    /** This switch's pool (attribute Slots). */
    uint32_t Slots() const
    {
        return m_slots;
    }

  private:
    void StartApplication() override;
    void StopApplication() override;
    void HandleUdp(Ptr<Socket> s);

    /** How a granted aggregation's stream stands at this switch. */
    enum class Hold
    {
        None,  //!< no packet seen yet
        Slots, //!< holds `slots` slots
        Done,  //!< its last result has left; its slots are free again
    };
    /** One aggregation's stream at this switch. */
    struct Stream
    {
        Hold hold = Hold::None;
        uint32_t slots = 0;       //!< w, while held
        uint32_t active = 0;      //!< sequence numbers holding one of the w slots
        uint32_t resultsDown = 0; //!< results that left this switch downwards
        int64_t since = 0;        //!< when the first packet arrived, ns
        std::map<uint32_t, std::vector<InaWire>> queued; //!< seq -> packets waiting for one of the w slots
    };
    struct SeqState
    {
        uint32_t count = 0;
        uint64_t value = 0;
    };

    void OnData(const InaWire& w);
    void Take(uint64_t agg, Stream& s, uint32_t w);
    void Feed(uint64_t agg, Stream& s, const InaWire& w);
    void Consume(const InaWire& w);
    void Complete(uint64_t agg, uint32_t seq, uint32_t len, uint64_t value);
    /** One result of `agg` left downwards; the last one releases the stream's slots. */
    void ResultLeft(uint64_t agg);
    void Release(uint64_t agg, Stream& s);
    void SendOnEdge(uint32_t idx, const InaWire& w);

    uint32_t m_node = 0;
    uint32_t m_slots = 0;
    TracedValue<uint32_t> m_inUse{0}; //!< trace source SlotsInUse
    Ptr<Socket> m_udp;
    std::map<std::pair<uint64_t, uint32_t>, SeqState> m_state;
    std::map<uint64_t, Stream> m_streams;
    std::map<uint32_t, std::deque<InaWire>> m_edgeQueue; //!< packets for edges not open yet
};

} // namespace ns3

#endif
