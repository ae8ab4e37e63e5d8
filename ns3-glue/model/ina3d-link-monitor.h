/*
 * ina3d glue: what the network really forwarded, channel by channel.
 *
 * Every point-to-point device reports each frame it starts to put on the wire (the
 * device's PhyTxBegin trace source, PPP header included). The monitor classifies the
 * frame from its headers and adds its bytes to the channel (one direction of one
 * topology.txt link): trace data (INA packets, RoCE data packets, TCP segments carrying
 * payload) or control (TCP segments without payload — ACKs, SYN, FIN —, RoCE CNPs).
 * It also counts every packet any queue or device drops: the glue's transports assume a
 * lossless network, so a drop is reported, never absorbed.
 */
#ifndef INA3D_LINK_MONITOR_H
#define INA3D_LINK_MONITOR_H

#include "ns3/network-module.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/traffic-control-module.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ns3
{

/** What a frame on a link carries. */
enum class FrameKind
{
    Data,    //!< bytes of trace records (INA packets, RoCE data, TCP segments with payload)
    Control, //!< transport signalling only (TCP ACK/SYN/FIN without payload, RoCE CNP)
};

/**
 * Classifies a frame as a point-to-point device transmits it (PPP, IPv4, UDP/TCP headers
 * in place), from its headers alone.
 */
FrameKind ClassifyFrame(Ptr<const Packet> frame);

/** Per-channel frame counters and the drop counter of one run. */
class LinkMonitor
{
  public:
    /** One direction of a topology.txt link. */
    struct Channel
    {
        uint32_t link = 0;     //!< topology.txt link row, 0-based
        uint32_t from = 0;     //!< transmitting node
        uint32_t to = 0;       //!< receiving node
        uint64_t rateBps = 0;  //!< the link's rate
        uint64_t dataBytes = 0;
        uint64_t dataFrames = 0;
        uint64_t controlBytes = 0;
        uint64_t controlFrames = 0;
    };

    /**
     * Counts the frames `dev` (on `from`, towards `to` over topology link `link`)
     * transmits; channel index 2·link for the link's first node sending, 2·link+1 for the
     * second, as the replayer numbers channels.
     */
    void Watch(Ptr<PointToPointNetDevice> dev, uint32_t link, bool reverse, uint32_t from,
               uint32_t to, uint64_t rateBps);
    /** Counts the drops of a queue disc installed on the egress of `from` towards `to`. */
    void WatchQueueDisc(Ptr<QueueDisc> qd, uint32_t from, uint32_t to);

    /** Frames dropped anywhere (device queues, queue discs, devices). */
    uint64_t Drops() const
    {
        return m_drops;
    }
    /** Where the first drop happened, for the error message. */
    const std::string& FirstDrop() const
    {
        return m_firstDrop;
    }
    /**
     * The most bytes and the most packets any one watched queue (a device queue or a queue
     * disc) held at once: how far the run stayed from the drops of a full queue.
     */
    uint64_t PeakQueueBytes() const
    {
        return m_peakBytes;
    }
    uint64_t PeakQueuePackets() const
    {
        return m_peakPackets;
    }

    /**
     * Writes `link,from,to,rate_bps,bytes,utilisation` (the replayer's links.csv schema)
     * for every channel that carried data (or control, with `control`) frames, in channel
     * order; utilisation is bytes·8 / (rate · makespan). Returns false when the file
     * cannot be written.
     */
    bool WriteCsv(const std::string& path, int64_t makespanNs, bool control) const;

  private:
    static void TxBegin(LinkMonitor* m, uint32_t channel, Ptr<const Packet> frame);
    static void DeviceDrop(LinkMonitor* m, std::string where, Ptr<const Packet> p);
    static void DiscDrop(LinkMonitor* m, std::string where, Ptr<const QueueDiscItem> item);
    void Drop(const std::string& where);
    static void QueueBytes(LinkMonitor* m, uint32_t oldValue, uint32_t newValue);
    static void QueuePackets(LinkMonitor* m, uint32_t oldValue, uint32_t newValue);
    /** Follows the occupancy of a queue or queue disc (its BytesInQueue, PacketsInQueue). */
    void WatchOccupancy(Ptr<Object> queue);

    std::vector<Channel> m_channels;
    uint64_t m_drops = 0;
    std::string m_firstDrop;
    uint64_t m_peakBytes = 0;
    uint64_t m_peakPackets = 0;
};

} // namespace ns3

#endif
