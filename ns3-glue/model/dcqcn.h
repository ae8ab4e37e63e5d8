/*
 * ina3d glue: the DCQCN reaction point of one RoCE queue pair, as plain C++ with explicit
 * time (ns), so its equations are testable without a network (ns3-glue/test/dcqcn-test.cc)
 * and the ns-3 application only schedules its timers.
 *
 * Semantics (the rate-based DCQCN of HPCC's and SimAI's ns-3, "Mellanox version"; keys
 * of config.txt in capitals):
 *  - a queue pair starts at line rate, target = line rate;
 *  - the first CNP sets alpha = 1 and starts two grids: alpha updates every
 *    ALPHA_RESUME_INTERVAL and rate-decrease checks every RATE_DECREASE_INTERVAL (1 ns
 *    after the alpha update of the same instant);
 *  - alpha update: alpha = (1-g)·alpha + g if a CNP arrived since the previous update,
 *    else alpha = (1-g)·alpha (g = EWMA_GAIN);
 *  - rate-decrease check, when a CNP arrived since the previous check: target = rate
 *    (unless CLAMP_TARGET_RATE is 0 and no increase happened since the previous decrease),
 *    rate = max(MIN_RATE, rate·(1 - alpha/2)); the increase stages reset and the increase
 *    timer restarts;
 *  - increase timer, every RP_TIMER after a decrease: stage T < FAST_RECOVERY_TIMES: fast
 *    recovery, rate = (rate + target)/2; T = FAST_RECOVERY_TIMES: additive increase, target
 *    += RATE_AI; T above: hyper increase, target += RATE_HAI; target never above line rate,
 *    rate = ceil((rate + target)/2) after each; then T += 1;
 *  - optional byte counter (RP_BYTE_COUNTER bytes, 0 = off as in HPCC and SimAI): every
 *    RP_BYTE_COUNTER bytes sent since the last decrease is an increase event too, the stage
 *    being DCQCN's: fast recovery while max(T, BC) < F, hyper increase once min(T, BC) > F,
 *    additive otherwise.
 * Alpha is updated lazily (exactly as the per-interval updates would, applied when read),
 * so an idle queue pair costs no events.
 */
#ifndef INA3D_DCQCN_H
#define INA3D_DCQCN_H

#include <cstdint>
#include <string>

namespace ns3
{

/** DCQCN parameters, defaults as SimAI's configuration (SimAI.conf). */
struct DcqcnConfig
{
    double ewmaGain = 0.00390625;         //!< EWMA_GAIN, g
    int64_t alphaResumeNs = 1000;         //!< ALPHA_RESUME_INTERVAL (config.txt: µs)
    int64_t rateDecreaseNs = 4000;        //!< RATE_DECREASE_INTERVAL (µs)
    int64_t rpTimerNs = 900000;           //!< RP_TIMER (µs)
    uint32_t fastRecoveryTimes = 1;       //!< FAST_RECOVERY_TIMES, F
    uint64_t rateAiBps = 50000000;        //!< RATE_AI
    uint64_t rateHaiBps = 100000000;      //!< RATE_HAI
    uint64_t minRateBps = 100000000;      //!< MIN_RATE
    bool clampTargetRate = false;         //!< CLAMP_TARGET_RATE
    uint64_t byteCounter = 0;             //!< RP_BYTE_COUNTER (bytes; 0: off)
    int64_t cnpIntervalNs = 50000;        //!< notification point: one CNP per 50 µs per flow
};

/** What changed the rate (for logs and trace sources). */
enum class DcqcnEvent
{
    Decrease,
    FastRecovery,
    AdditiveIncrease,
    HyperIncrease,
};

const char* DcqcnEventName(DcqcnEvent e);

/** The reaction point of one queue pair. */
class DcqcnRp
{
  public:
    DcqcnRp() = default;
    DcqcnRp(const DcqcnConfig& c, uint64_t lineRateBps);

    /** A CNP arrived at `now`. */
    void OnCnp(int64_t now);
    /** `bytes` of data left at `now` (byte counter). Returns true when the rate changed. */
    bool OnSent(int64_t now, uint64_t bytes);
    /** The earliest timer due (rate-decrease check or increase timer), or -1 for none. */
    int64_t NextEvent() const;
    /** Runs every timer due at or before `now`. Returns true when the rate changed. */
    bool Advance(int64_t now);

    uint64_t Rate() const
    {
        return m_rate;
    }
    uint64_t Target() const
    {
        return m_target;
    }
    uint64_t LineRate() const
    {
        return m_line;
    }
    /** Alpha as of `now` (applies the alpha updates due by then). */
    double Alpha(int64_t now);
    /** The last rate change: when and why. */
    int64_t LastChangeNs() const
    {
        return m_lastChange;
    }
    DcqcnEvent LastEvent() const
    {
        return m_lastEvent;
    }
    /** Stage counters (timer, byte counter) since the last decrease. */
    uint32_t TimerStage() const
    {
        return m_t;
    }
    uint32_t ByteStage() const
    {
        return m_bc;
    }

  private:
    void AdvanceAlpha(int64_t now);
    void Decrease(int64_t now);
    void Increase(int64_t now);

    DcqcnConfig m_c;
    uint64_t m_line = 0;
    uint64_t m_rate = 0;
    uint64_t m_target = 0;
    double m_alpha = 1.0;
    bool m_started = false;      //!< a CNP has arrived: the alpha and decrease grids run
    int64_t m_origin = 0;        //!< time of the first CNP: origin of both grids
    int64_t m_alphaTicks = 0;    //!< alpha updates applied so far
    bool m_alphaCnp = false;     //!< a CNP since the last alpha update
    bool m_decreaseCnp = false;  //!< a CNP since the last decrease check
    int64_t m_nextDecrease = -1; //!< next decrease check that will act, -1: none
    int64_t m_nextIncrease = -1; //!< next increase timer, -1: none
    uint32_t m_t = 0;            //!< timer stage
    uint32_t m_bc = 0;           //!< byte-counter stage
    uint64_t m_bytes = 0;        //!< bytes sent since the last byte-counter event
    int64_t m_lastChange = 0;
    DcqcnEvent m_lastEvent = DcqcnEvent::Decrease;
};

} // namespace ns3

#endif
