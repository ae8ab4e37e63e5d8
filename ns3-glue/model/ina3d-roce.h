/*
 * ina3d glue: a RoCE-like transport with DCQCN on stock ns-3.37.
 *
 * Ina3dRoceApplication (one per host, with TRANSPORT roce) carries the trace's net records
 * as RoCEv2 does: UDP packets to port 4791 carrying an 18-byte transport header, one queue
 * pair per connection (source host, destination host, NCCL channel), records of a
 * connection sent back to back in start order, every packet holding bytes of one record
 * only (at most 1,000 payload bytes, the replayer's network packet payload, so a packet is
 * payload + 48 bytes on the wire as the replayer counts it). The queue pairs of channel c
 * send from their host's channel-c UDP port (registered with Ina3dPairRouting, so the
 * fabric routes them on channel c's path, as a RoCE NIC's per-QP source port spreads QPs
 * over ECMP paths); CNPs travel back to that port.
 *
 *  - Reaction point (sender): each queue pair starts at its NIC's line rate and is paced
 *    at its current DCQCN rate (DcqcnRp, model/dcqcn.h); the NIC serves the queue pairs
 *    with a packet due round robin and keeps one packet waiting behind the one on the
 *    wire, so queue pairs share the NIC instead of piling packets into its queue.
 *  - Relaying (BCube, DCell, TopoOpt): packets the host forwards wait in a queue per
 *    relayed connection, which the NIC serves in the same round robin as its own queue
 *    pairs (Ina3dPairRouting::SetRelayHook). Forwarded straight into the device queue they
 *    would starve the host's own queue pairs, which only send when that queue is empty; a
 *    NIC arbitrates between its send queues instead, and the replayer shares the link.
 *  - Notification point (receiver): a data packet arriving with CE set makes the receiver
 *    send a CNP to the sender, at most one per queue pair per CnpInterval (50 µs).
 *  - Congestion point: RED queue discs with ECN on every switch port (Ina3dHelper), with
 *    the thresholds of config.txt's KMIN_MAP/KMAX_MAP/PMAX_MAP for the port's rate.
 *
 * Reliability: none beyond detection. Buffers are deep enough for the network to be
 * lossless; every drop is counted (LinkMonitor) and fails the run, and a receiver that
 * sees a packet sequence number other than the next one reports it as a protocol error.
 * A record completes when the receiver has all its bytes.
 */
#ifndef INA3D_ROCE_H
#define INA3D_ROCE_H

#include "dcqcn.h"

#include "ns3/applications-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-net-device.h"

#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

namespace ns3
{

class Ina3dPairRouting;

/** UDP port of RoCEv2. */
static const uint16_t ROCE_PORT = 4791;

/**
 * The RoCE transport header of the glue: 18 bytes, so that with UDP (8), IPv4 (20) and
 * PPP (2) a packet carries the replayer's 48 header bytes (real RoCEv2 carries a 12-byte
 * BTH and a 4-byte ICRC over UDP/IP/Ethernet).
 */
class RoceHeader : public Header
{
  public:
    /** What a packet is. */
    enum Opcode : uint8_t
    {
        DATA = 1, //!< bytes of a record
        CNP = 2,  //!< congestion notification, receiver to sender
    };

    static TypeId GetTypeId();
    TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(Buffer::Iterator start) const override;
    uint32_t Deserialize(Buffer::Iterator start) override;
    void Print(std::ostream& os) const override;

    uint8_t GetOpcode() const
    {
        return m_opcode;
    }

    uint8_t m_opcode = DATA;
    uint32_t m_psn = 0;    //!< packet sequence number within the queue pair
    uint32_t m_len = 0;    //!< payload bytes
    uint32_t m_src = 0;    //!< sending node
    uint32_t m_dst = 0;    //!< receiving node
};

/** Host role under TRANSPORT roce: queue pairs with DCQCN, and their receive side. */
class Ina3dRoceApplication : public Application
{
  public:
    static TypeId GetTypeId();
    Ina3dRoceApplication();
    ~Ina3dRoceApplication() override;

    /** Queues the Net record `idx` (this node its source) on its queue pair. */
    void StartFlow(uint32_t idx);

    /** CNPs this host sent (as a receiver) and received (as a sender). */
    uint64_t CnpsSent() const
    {
        return m_cnpsSent;
    }
    uint64_t CnpsReceived() const
    {
        return m_cnpsReceived;
    }

    /**
     * TracedCallback signature of RateChange: destination node, new rate and target
     * (bit/s), alpha, and the DCQCN event (DcqcnEventName).
     */
    typedef void (*RateChangeCallback)(uint32_t dst, uint64_t rateBps, uint64_t targetBps,
                                       double alpha, const char* event);

  private:
    void StartApplication() override;
    void StopApplication() override;

    /** A queue pair's key: (destination node, NCCL channel). */
    typedef std::pair<uint32_t, uint32_t> QpKey;
    /** One queue pair towards `dst` on channel `channel`. */
    struct Qp
    {
        uint32_t dst = 0;
        uint32_t channel = 0;
        Ipv4Address addr;
        uint32_t nic = 0;                                 //!< output interface
        std::deque<std::pair<uint32_t, uint64_t>> queue; //!< (record, bytes left to send)
        uint32_t psn = 0;
        DcqcnRp rp;
        Time nextAvail;          //!< pacing: the next packet may leave then
        uint32_t lastWire = 1048; //!< wire bytes of the last packet sent (pacing adjustment)
        EventId ccEvent;         //!< the next DCQCN timer
    };
    /** A relayed connection's key: (source node, destination node, NCCL channel). */
    typedef std::tuple<uint32_t, uint32_t, uint32_t> RelayKey;
    /** One output device, the queue pairs it serves and the connections it relays. */
    struct Nic
    {
        Ptr<PointToPointNetDevice> dev;
        Ptr<Queue<Packet>> queue;
        DataRate rate;
        std::vector<QpKey> qps; //!< queue pairs, in creation order
        std::vector<RelayKey> relays; //!< relayed connections, in order of first packet
        /** Packets waiting to be relayed, per connection: each puts one on the wire. */
        std::map<RelayKey, std::deque<std::function<void()>>> relayed;
        size_t next = 0;           //!< round-robin position over qps, then relays
        EventId wake;
        EventId dequeued; //!< a Pump after the device's Dequeue, deferred (see Dequeued)
        bool pumping = false;
        bool again = false;
    };
    /** Receive side of the queue pair from one source on one channel. */
    struct Rx
    {
        uint32_t expected = 0; //!< next packet sequence number
        Time lastCnp = Seconds(-1);
    };

    /** This node's Ina3dPairRouting (null under another routing protocol). */
    Ptr<Ina3dPairRouting> Routing() const;
    Qp& GetQp(uint32_t dst, uint32_t channel);
    /** The UDP socket channel `channel`'s queue pairs send from (its port registered). */
    Ptr<Socket> ChannelSocket(uint32_t channel);
    Nic& GetNic(uint32_t interface);
    /** Sends what the NIC may send now, then arms a wake-up for the next packet due. */
    void Pump(uint32_t interface);
    static void Dequeued(Ina3dRoceApplication* app, uint32_t interface, Ptr<const Packet> p);
    void Wake(uint32_t interface);
    void SendData(Qp& q);
    /** A packet of connection (src, dst, channel) to relay out of `interface` (RelayHook). */
    void Relay(uint32_t interface, uint32_t src, uint32_t dst, uint32_t channel,
               std::function<void()> send);
    /** Puts the next packet of the queue pair or relayed connection due on `n`'s wire, if any. */
    bool SendNext(Nic& n, Time now);
    void HandleRead(Ptr<Socket> s);
    /** A packet of `h.m_src`'s channel-`channel` connection arrived from UDP port `fromPort`. */
    void Receive(const RoceHeader& h, bool ce, uint32_t channel, uint16_t fromPort);
    void ScheduleCc(Qp& q);
    void CcTimer(QpKey key);
    /** The rate of `q` changed from `old`: shift its pacing and tell the NIC. */
    void RateChanged(Qp& q, uint64_t old);

    // attributes (config.txt keys through Ina3dHelper), combined into m_cc at start
    double m_ewmaGain = 0.00390625;
    Time m_alphaResume;
    Time m_rateDecrease;
    Time m_rpTimer;
    uint32_t m_fastRecovery = 1;
    DataRate m_rateAi;
    DataRate m_rateHai;
    DataRate m_minRate;
    bool m_clampTarget = false;
    uint64_t m_byteCounter = 0;
    Time m_cnpInterval;
    uint32_t m_payload = 1000;
    DcqcnConfig m_cc;
    uint32_t m_node = 0;
    Ptr<Socket> m_socket;                      //!< port 4791: data in, CNPs out
    std::map<uint32_t, Ptr<Socket>> m_channels; //!< channel -> its sending socket
    std::map<QpKey, Qp> m_qps;                  //!< by (destination node, channel)
    std::map<uint32_t, Nic> m_nics;             //!< by interface
    std::map<std::pair<uint32_t, uint32_t>, Rx> m_rx; //!< by (source node, channel)
    uint64_t m_cnpsSent = 0;
    uint64_t m_cnpsReceived = 0;
    TracedCallback<uint32_t, uint64_t, uint64_t, double, const char*> m_rateTrace;
    TracedCallback<uint32_t> m_cnpSentTrace;
};

} // namespace ns3

#endif
