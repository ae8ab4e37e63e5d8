/*
 * ina3d glue for stock ns-3.37: the two application roles.
 *
 * InaHostApplication (one per GPU host): sends and sinks the TCP flows of Net records,
 * streams INA up edges as UDP packets with a window of outstanding slots, receives INA
 * results, and aggregates best-effort overflow (fallback) for switches out of slots.
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
    uint32_t sw;    //!< the switch a fallback packet belongs to
    uint32_t pad;

    enum Type : uint32_t
    {
        DATA = 1,      //!< child -> aggregating switch
        RESULT = 2,    //!< switch -> child (down the tree)
        FB_DATA = 3,   //!< switch -> fallback host (best-effort overflow)
        FB_RESULT = 4, //!< fallback host -> switch
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

/** Host role: TCP flows, INA worker, fallback aggregator. */
class InaHostApplication : public Application
{
  public:
    static TypeId GetTypeId();
    InaHostApplication();
    ~InaHostApplication() override;

    /** Starts the TCP flow of Net record `idx` (this node is its source). */
    void StartFlow(uint32_t idx);
    /** Starts streaming the INA up edge `idx` (this node is the worker). */
    void StartIna(uint32_t idx);

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
    std::map<std::tuple<uint64_t, uint32_t, uint32_t>, std::pair<uint32_t, uint64_t>> m_fallback;
};

/**
 * Switch role: the aggregator slot pool.
 *
 * One slot model (README, "Slots"): an aggregation's stream at this switch holds
 * w = min(INA_WINDOW, packets of the stream, the pool it draws from) slots, from the
 * arrival of its first packet here until its last result packet leaves here downwards
 * (the root multicasting it, a non-root forwarding its parent's result). The policy
 * grants or refuses the w slots at that first packet: `best-effort` sends a refused
 * stream's packets to its fallback host, `static` (the pool split evenly among the
 * enabled classes) and `priority` (one pool, waiting streams served in class order) hold
 * them here until w slots are free.
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
    /** The streams waiting for slots, empty when none (a run that ends with waiting streams
     * stalled on slots held by streams waiting elsewhere). */
    std::string Waiting() const;

  private:
    void StartApplication() override;
    void StopApplication() override;
    void HandleUdp(Ptr<Socket> s);

    /** How a stream stands at this switch. */
    enum class Grant
    {
        None,     //!< no packet seen yet
        Waiting,  //!< refused for now (static, priority): packets held here
        Slots,    //!< holds `slots` slots
        Fallback, //!< refused (best-effort): packets go to the fallback host
        Done,     //!< its last result has left; its slots are free again
    };
    /** One aggregation's stream at this switch. */
    struct Stream
    {
        Grant grant = Grant::None;
        uint32_t slots = 0;       //!< w, while granted
        uint32_t active = 0;      //!< sequence numbers holding one of the w slots
        uint32_t resultsDown = 0; //!< results that left this switch downwards
        int64_t since = 0;        //!< when the slots were granted, ns
        std::deque<InaWire> held; //!< packets that arrived while waiting for the grant
        std::map<uint32_t, std::vector<InaWire>> queued; //!< seq -> packets waiting for one of the w slots
    };
    struct SeqState
    {
        uint32_t count = 0;
        uint64_t value = 0;
    };

    /** Slots a stream may ever hold here: the class share under static, else the pool. */
    uint32_t Capacity() const;
    /** w of an aggregation's stream. */
    uint32_t StreamSlots(uint64_t agg) const;
    bool Fits(uint64_t agg, uint32_t w) const;
    /** Whether a newcomer must queue behind the streams already waiting. */
    bool MustQueue(uint64_t agg) const;
    void OnData(const InaWire& w);
    void Take(uint64_t agg, Stream& s, uint32_t w);
    void Feed(uint64_t agg, Stream& s, const InaWire& w);
    void Consume(const InaWire& w, bool fallback);
    void Complete(uint64_t agg, uint32_t seq, uint32_t len, uint64_t value);
    /** One result of `agg` left downwards; the last one releases the stream's slots. */
    void ResultLeft(uint64_t agg);
    void Release(uint64_t agg, Stream& s);
    void GrantWaiting();
    void SendOnEdge(uint32_t idx, const InaWire& w);

    uint32_t m_node = 0;
    uint32_t m_slots = 0;
    TracedValue<uint32_t> m_inUse{0}; //!< trace source SlotsInUse
    Ptr<Socket> m_udp;
    std::map<std::pair<uint64_t, uint32_t>, SeqState> m_state;
    std::map<uint64_t, Stream> m_streams;
    std::vector<uint64_t> m_waitList;          //!< streams waiting for slots, by arrival
    std::map<uint32_t, uint32_t> m_classInUse; //!< slots held per traffic class (static policy)
    uint32_t m_classShare = 0;                 //!< slots each class may hold (static policy)
    std::map<uint32_t, std::deque<InaWire>> m_edgeQueue; //!< packets for edges not open yet
};

} // namespace ns3

#endif
