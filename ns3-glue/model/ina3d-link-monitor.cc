/*
 * ina3d glue: per-channel frame counters and drop detection.
 */
#include "ina3d-link-monitor.h"

#include <algorithm>

#include "ina-apps.h"
#include "ina3d-roce.h"

#include "ns3/internet-module.h"
#include "ns3/ppp-header.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Ina3dLinkMonitor");

FrameKind
ClassifyFrame(Ptr<const Packet> frame)
{
    Ptr<Packet> p = frame->Copy();
    PppHeader ppp;
    p->RemoveHeader(ppp);
    if (ppp.GetProtocol() != 0x0021) // PPP's number for IPv4
        return FrameKind::Control;
    Ipv4Header ip;
    p->RemoveHeader(ip);
    if (ip.GetProtocol() == UdpL4Protocol::PROT_NUMBER)
    {
        UdpHeader udp;
        p->RemoveHeader(udp);
        if (udp.GetDestinationPort() == INA_PORT)
            return FrameKind::Data;
        if (udp.GetDestinationPort() == ROCE_PORT)
        {
            RoceHeader bth;
            p->PeekHeader(bth);
            return bth.GetOpcode() == RoceHeader::DATA ? FrameKind::Data : FrameKind::Control;
        }
        return FrameKind::Control;
    }
    if (ip.GetProtocol() == TcpL4Protocol::PROT_NUMBER)
    {
        TcpHeader tcp;
        p->RemoveHeader(tcp);
        return p->GetSize() > 0 ? FrameKind::Data : FrameKind::Control;
    }
    return FrameKind::Control;
}

void
LinkMonitor::Watch(Ptr<PointToPointNetDevice> dev, uint32_t link, bool reverse, uint32_t from,
                   uint32_t to, uint64_t rateBps)
{
    uint32_t idx = 2 * link + (reverse ? 1 : 0);
    if (m_channels.size() <= idx)
        m_channels.resize(idx + 1);
    Channel& c = m_channels[idx];
    c.link = link;
    c.from = from;
    c.to = to;
    c.rateBps = rateBps;
    dev->TraceConnectWithoutContext("PhyTxBegin", MakeBoundCallback(&LinkMonitor::TxBegin, this, idx));
    std::string where = "node " + std::to_string(from) + " towards node " + std::to_string(to);
    for (const char* src : {"MacTxDrop", "PhyTxDrop", "PhyRxDrop"})
        dev->TraceConnectWithoutContext(
            src, MakeBoundCallback(&LinkMonitor::DeviceDrop, this, where + " (device " + src + ")"));
    dev->GetQueue()->TraceConnectWithoutContext(
        "Drop", MakeBoundCallback(&LinkMonitor::DeviceDrop, this, where + " (device queue full)"));
    WatchOccupancy(dev->GetQueue());
}

void
LinkMonitor::WatchOccupancy(Ptr<Object> queue)
{
    queue->TraceConnectWithoutContext("BytesInQueue", MakeBoundCallback(&LinkMonitor::QueueBytes, this));
    queue->TraceConnectWithoutContext("PacketsInQueue",
                                      MakeBoundCallback(&LinkMonitor::QueuePackets, this));
}

void
LinkMonitor::QueueBytes(LinkMonitor* m, uint32_t, uint32_t bytes)
{
    m->m_peakBytes = std::max<uint64_t>(m->m_peakBytes, bytes);
}

void
LinkMonitor::QueuePackets(LinkMonitor* m, uint32_t, uint32_t packets)
{
    m->m_peakPackets = std::max<uint64_t>(m->m_peakPackets, packets);
}

void
LinkMonitor::WatchQueueDisc(Ptr<QueueDisc> qd, uint32_t from, uint32_t to)
{
    std::string where = "node " + std::to_string(from) + " towards node " + std::to_string(to) +
                        " (ECN queue disc)";
    qd->TraceConnectWithoutContext("Drop", MakeBoundCallback(&LinkMonitor::DiscDrop, this, where));
    WatchOccupancy(qd);
}

void
LinkMonitor::TxBegin(LinkMonitor* m, uint32_t channel, Ptr<const Packet> frame)
{
    Channel& c = m->m_channels[channel];
    if (ClassifyFrame(frame) == FrameKind::Data)
    {
        c.dataBytes += frame->GetSize();
        c.dataFrames++;
    }
    else
    {
        c.controlBytes += frame->GetSize();
        c.controlFrames++;
    }
}

void
LinkMonitor::DeviceDrop(LinkMonitor* m, std::string where, Ptr<const Packet>)
{
    m->Drop(where);
}

void
LinkMonitor::DiscDrop(LinkMonitor* m, std::string where, Ptr<const QueueDiscItem>)
{
    m->Drop(where);
}

void
LinkMonitor::Drop(const std::string& where)
{
    if (m_drops++ == 0)
        m_firstDrop = "at " + std::to_string(Simulator::Now().GetNanoSeconds()) + " ns at " + where;
}

bool
LinkMonitor::WriteCsv(const std::string& path, int64_t makespanNs, bool control) const
{
    std::ofstream o(path);
    o << "link,from,to,rate_bps,bytes,utilisation\n";
    for (const Channel& c : m_channels)
    {
        uint64_t bytes = control ? c.controlBytes : c.dataBytes;
        if (bytes == 0)
            continue;
        double capBytes = double(c.rateBps) / 8e9 * double(makespanNs);
        char util[32];
        std::snprintf(util, sizeof util, "%.6f", capBytes > 0 ? double(bytes) / capBytes : 0.0);
        o << c.link << "," << c.from << "," << c.to << "," << c.rateBps << "," << bytes << ","
          << util << "\n";
    }
    return bool(o);
}

} // namespace ns3
