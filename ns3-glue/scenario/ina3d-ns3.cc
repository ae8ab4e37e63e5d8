/*
 * ina3d-ns3: runs an ina3d trace closed-loop on stock ns-3.37.
 *
 *   ina3d-ns3 --dir=DIR
 *
 * reads DIR/{params,topology,routes,trace}.txt written by `ina3d ns3 emit`, writes
 * DIR/fct.csv, DIR/fct.txt, DIR/stats.txt and, last, DIR/done. Exit status 0 when every
 * record finished, 2 on bad input, 3 when the run stopped with records unfinished.
 */
#include "../helper/ina3d-helper.h"

#include <chrono>
#include <iostream>

using namespace ns3;

int
main(int argc, char** argv)
{
    std::string dir = ".";
    CommandLine cmd(__FILE__);
    cmd.AddValue("dir", "directory written by `ina3d ns3 emit`", dir);
    cmd.Parse(argc, argv);

    auto wall0 = std::chrono::steady_clock::now();
    Dag& dag = Dag::Get();
    Ina3dHelper helper;
    std::string err;
    if (!helper.ReadParams(dir + "/params.txt", dag.params, err) ||
        !helper.ReadTopology(dir + "/topology.txt", err))
    {
        std::cerr << "error: " << err << std::endl;
        return 2;
    }
    const GlueParams& p = dag.params;
    // TCP NewReno over a deep drop-tail, effectively lossless network (README: transport).
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpNewReno::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(p.tcpSegment));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(8 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(8 << 20));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    // RDMA-like start: NCCL's RoCE queue pairs send at line rate from the first byte, so the
    // window opens at about one bandwidth-delay product of a 3-tier 400 Gb/s path instead
    // of TCP's 10 segments (README: transport).
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(p.tcpInitialCwnd));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(1)));
    helper.BuildNetwork(p);
    if (!helper.ReadRoutes(dir + "/routes.txt", err) ||
        !dag.Load(dir + "/trace.txt", helper.NodeCount(), helper.IsSwitch(), err) ||
        (p.inaPolicy == "planned" && !helper.ReadReservations(dir + "/reservations.txt", dag, err)))
    {
        std::cerr << "error: " << err << std::endl;
        return 2;
    }
    helper.InstallApplications();
    Simulator::ScheduleNow(&Dag::Begin, &dag);
    Simulator::Stop(Seconds(p.stopTimeS));
    std::cerr << "progress 0 " << dag.records.size() << " 0" << std::endl;
    Simulator::Run();
    // A packet dropped for want of a route is a broken input, never a quiet slowdown.
    dag.protocolErrors += Ina3dPairRouting::GetMisses();
    double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    bool complete = dag.WriteOutputs(dir, wall);
    Simulator::Destroy();
    return complete ? 0 : 3;
}
