/*
 * ina3d glue: DCQCN reaction point (see dcqcn.h for the equations).
 */
#include "dcqcn.h"

#include <algorithm>
#include <cmath>

namespace ns3
{

const char*
DcqcnEventName(DcqcnEvent e)
{
    switch (e)
    {
    case DcqcnEvent::Decrease:
        return "decrease";
    case DcqcnEvent::FastRecovery:
        return "fast-recovery";
    case DcqcnEvent::AdditiveIncrease:
        return "additive-increase";
    case DcqcnEvent::HyperIncrease:
        return "hyper-increase";
    }
    return "?";
}

DcqcnRp::DcqcnRp(const DcqcnConfig& c, uint64_t lineRateBps)
    : m_c(c),
      m_line(lineRateBps),
      m_rate(lineRateBps),
      m_target(lineRateBps)
{
}

void
DcqcnRp::AdvanceAlpha(int64_t now)
{
    if (!m_started || now < m_origin)
        return;
    int64_t due = (now - m_origin) / m_c.alphaResumeNs;
    int64_t n = due - m_alphaTicks;
    if (n <= 0)
        return;
    double keep = 1.0 - m_c.ewmaGain;
    if (m_alphaCnp)
    {
        m_alpha = keep * m_alpha + m_c.ewmaGain;
        m_alphaCnp = false;
        n--;
    }
    // n updates without a CNP, one per interval
    m_alpha *= n < 64 ? std::pow(keep, double(n)) : std::exp(double(n) * std::log(keep));
    m_alphaTicks = due;
}

double
DcqcnRp::Alpha(int64_t now)
{
    AdvanceAlpha(now);
    return m_alpha;
}

void
DcqcnRp::OnCnp(int64_t now)
{
    AdvanceAlpha(now);
    m_alphaCnp = true;
    m_decreaseCnp = true;
    if (!m_started)
    {
        // The first CNP: alpha starts at 1 (this CNP is its initial value, not an update)
        // and both grids start here; the target is the rate at this moment.
        m_started = true;
        m_origin = now;
        m_alphaTicks = 0;
        m_alpha = 1.0;
        m_alphaCnp = false;
        m_target = m_rate;
    }
    if (m_nextDecrease < 0)
    {
        // checks run at origin + 1 ns + k·interval, k ≥ 1; the first one after now acts
        int64_t x = now - m_origin - 1;
        int64_t k = x < 0 ? 1 : x / m_c.rateDecreaseNs + 1;
        m_nextDecrease = m_origin + 1 + k * m_c.rateDecreaseNs;
    }
}

int64_t
DcqcnRp::NextEvent() const
{
    int64_t t = -1;
    if (m_decreaseCnp && m_nextDecrease >= 0)
        t = m_nextDecrease;
    if (m_nextIncrease >= 0 && (t < 0 || m_nextIncrease < t))
        t = m_nextIncrease;
    return t;
}

void
DcqcnRp::Decrease(int64_t now)
{
    AdvanceAlpha(now);
    // CLAMP_TARGET_RATE 0: a CNP before any increase since the last decrease keeps the target
    if (m_c.clampTargetRate || m_t != 0)
        m_target = m_rate;
    uint64_t cut = uint64_t(double(m_rate) * (1.0 - m_alpha / 2.0));
    m_rate = std::max(m_c.minRateBps, cut);
    m_t = 0;
    m_bc = 0;
    m_bytes = 0;
    m_decreaseCnp = false;
    m_nextDecrease = -1;
    m_nextIncrease = now + m_c.rpTimerNs;
    m_lastChange = now;
    m_lastEvent = DcqcnEvent::Decrease;
}

void
DcqcnRp::Increase(int64_t now)
{
    uint32_t f = m_c.fastRecoveryTimes;
    DcqcnEvent e;
    if (m_c.byteCounter == 0)
        e = m_t < f ? DcqcnEvent::FastRecovery
                    : (m_t == f ? DcqcnEvent::AdditiveIncrease : DcqcnEvent::HyperIncrease);
    else if (std::max(m_t, m_bc) < f)
        e = DcqcnEvent::FastRecovery;
    else if (std::min(m_t, m_bc) > f)
        e = DcqcnEvent::HyperIncrease;
    else
        e = DcqcnEvent::AdditiveIncrease;
    if (e == DcqcnEvent::AdditiveIncrease)
        m_target = std::min(m_line, m_target + m_c.rateAiBps);
    else if (e == DcqcnEvent::HyperIncrease)
        m_target = std::min(m_line, m_target + m_c.rateHaiBps);
    // the midpoint, rounded up so that the rate reaches the target exactly
    m_rate = m_rate / 2 + m_target / 2 + ((m_rate | m_target) & 1);
    m_lastChange = now;
    m_lastEvent = e;
}

bool
DcqcnRp::OnSent(int64_t now, uint64_t bytes)
{
    if (m_c.byteCounter == 0 || !m_started || (m_rate == m_line && m_target == m_line))
        return false;
    bool changed = false;
    m_bytes += bytes;
    while (m_bytes >= m_c.byteCounter)
    {
        m_bytes -= m_c.byteCounter;
        Increase(now);
        m_bc++;
        changed = true;
    }
    return changed;
}

bool
DcqcnRp::Advance(int64_t now)
{
    bool changed = false;
    for (int64_t t = NextEvent(); t >= 0 && t <= now; t = NextEvent())
    {
        if (m_decreaseCnp && t == m_nextDecrease)
            Decrease(t);
        else
        {
            Increase(t);
            m_t++;
            // once rate and target are back at line rate further increases change nothing
            m_nextIncrease = (m_rate == m_line && m_target == m_line) ? -1 : t + m_c.rpTimerNs;
        }
        changed = true;
    }
    return changed;
}

} // namespace ns3
