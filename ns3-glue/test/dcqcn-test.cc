/*
 * ina3d glue: DCQCN reaction point against its equations (see model/dcqcn.h), without a
 * network. Each expected value is recomputed here from the equations, step by step.
 * Prints one line per check and exits 1 on the first failure; run by tests/ns3.rs.
 *
 *   g++ -std=c++17 -O2 -o dcqcn-test ns3-glue/test/dcqcn-test.cc ns3-glue/model/dcqcn.cc
 */
#include "../model/dcqcn.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace ns3;

static int g_checks = 0;

#define CHECK(cond, ...)                                                                       \
    do                                                                                         \
    {                                                                                          \
        g_checks++;                                                                            \
        if (!(cond))                                                                           \
        {                                                                                      \
            std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                       \
            std::printf(__VA_ARGS__);                                                          \
            std::printf("\n");                                                                 \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

static const uint64_t LINE = 100000000000ull; // 100 Gb/s

static DcqcnConfig
Simai()
{
    return DcqcnConfig{}; // the defaults are SimAI.conf's values
}

/** alpha after `n` updates without a CNP, one multiplication per update. */
static double
Decay(double a, double g, int n)
{
    for (int i = 0; i < n; i++)
        a = (1 - g) * a;
    return a;
}

static void
a_queue_pair_starts_at_line_rate_with_no_timer()
{
    DcqcnRp rp(Simai(), LINE);
    CHECK(rp.Rate() == LINE && rp.Target() == LINE, "%llu", (unsigned long long)rp.Rate());
    CHECK(rp.NextEvent() == -1, "%lld", (long long)rp.NextEvent());
    std::printf("ok starts at line rate\n");
}

static void
the_first_cnp_cuts_the_rate_by_alpha_over_two_at_the_next_decrease_check()
{
    DcqcnConfig c = Simai();
    DcqcnRp rp(c, LINE);
    rp.OnCnp(0);
    // checks at 1 ns + k·4 µs: the first at 4,001 ns
    CHECK(rp.NextEvent() == 4001, "%lld", (long long)rp.NextEvent());
    CHECK(!rp.Advance(4000) && rp.Rate() == LINE, "nothing before the check");
    CHECK(rp.Advance(4001), "the check acts");
    // alpha = 1 at the first CNP, then four updates (1, 2, 3, 4 µs) without a CNP
    double alpha = Decay(1.0, c.ewmaGain, 4);
    uint64_t want = uint64_t(double(LINE) * (1 - alpha / 2));
    CHECK(rp.Rate() == want, "rate %llu, want %llu", (unsigned long long)rp.Rate(),
          (unsigned long long)want);
    CHECK(rp.Target() == LINE, "the first CNP's target is the rate it found");
    CHECK(rp.LastEvent() == DcqcnEvent::Decrease, "event");
    std::printf("ok first CNP: rate x (1 - alpha/2) = %.4f of line, alpha %.6f\n",
                double(rp.Rate()) / LINE, alpha);
}

static void
a_later_cnp_raises_alpha_by_g_and_cuts_again_by_the_new_alpha_over_two()
{
    DcqcnConfig c = Simai();
    DcqcnRp rp(c, LINE);
    rp.OnCnp(0);
    rp.Advance(4001);
    uint64_t r1 = rp.Rate();
    // a CNP at 10 µs: updates at 5..10 µs decayed alpha, the one at 11 µs adds g
    rp.OnCnp(10000);
    CHECK(rp.NextEvent() == 12001, "next check %lld", (long long)rp.NextEvent());
    rp.Advance(12001);
    double alpha = Decay(1.0, c.ewmaGain, 10);
    alpha = (1 - c.ewmaGain) * alpha + c.ewmaGain; // 11 µs
    alpha = Decay(alpha, c.ewmaGain, 1);            // 12 µs
    uint64_t want = uint64_t(double(r1) * (1 - alpha / 2));
    CHECK(rp.Rate() == want, "rate %llu, want %llu", (unsigned long long)rp.Rate(),
          (unsigned long long)want);
    CHECK(std::fabs(rp.Alpha(12001) - alpha) < 1e-12, "alpha %.15f want %.15f",
          rp.Alpha(12001), alpha);
    // no increase happened since the first decrease: CLAMP_TARGET_RATE 0 keeps the target
    CHECK(rp.Target() == LINE, "target %llu", (unsigned long long)rp.Target());
    std::printf("ok second CNP: cut by alpha/2 = %.6f\n", alpha / 2);
}

static void
cnps_between_two_checks_make_one_decrease()
{
    DcqcnRp rp(Simai(), LINE);
    rp.OnCnp(0);
    rp.OnCnp(1000);
    rp.OnCnp(2500);
    CHECK(rp.Advance(4001), "one check");
    uint64_t r = rp.Rate();
    CHECK(rp.NextEvent() == 4001 + 900000, "then only the increase timer: %lld",
          (long long)rp.NextEvent());
    CHECK(!rp.Advance(8001) && rp.Rate() == r, "no CNP since: no decrease at 8,001 ns");
    std::printf("ok CNPs coalesce per decrease interval\n");
}

static void
alpha_decays_by_one_minus_g_per_interval_without_cnps()
{
    DcqcnConfig c = Simai();
    DcqcnRp rp(c, LINE);
    rp.OnCnp(0);
    for (int us : {1, 7, 100, 1000, 5000})
    {
        double want = Decay(1.0, c.ewmaGain, us);
        double got = rp.Alpha(int64_t(us) * 1000 + 500);
        CHECK(std::fabs(got - want) < 1e-12 * std::max(1.0, want), "%d us: %.15f want %.15f", us,
              got, want);
    }
    std::printf("ok alpha decays (1-g) per %lld ns\n", (long long)c.alphaResumeNs);
}

static void
recovery_runs_fast_recovery_then_additive_then_hyper_increase_every_rp_timer()
{
    DcqcnConfig c = Simai();
    c.clampTargetRate = true; // the target is the rate before the cut: AI/HAI are visible
    c.fastRecoveryTimes = 2;
    DcqcnRp rp(c, LINE);
    rp.OnCnp(0);
    rp.Advance(4001);
    uint64_t rate = rp.Rate(), target = rp.Target();
    CHECK(target == LINE, "clamped target: the rate at the cut");
    // the target must sit below line rate for AI/HAI to show: a second cut after one increase
    int64_t t = 4001 + c.rpTimerNs;
    CHECK(rp.NextEvent() == t, "%lld", (long long)rp.NextEvent());
    rp.Advance(t);
    rate = rate / 2 + target / 2 + ((rate | target) & 1);
    CHECK(rp.Rate() == rate && rp.LastEvent() == DcqcnEvent::FastRecovery, "fast recovery 1");
    rp.OnCnp(t + 10);
    rp.Advance(t + 4000);
    target = rate;
    double alpha = rp.Alpha(t + 4000);
    rate = uint64_t(double(rate) * (1 - alpha / 2));
    CHECK(rp.Rate() == rate && rp.Target() == target, "second cut: rate %llu want %llu",
          (unsigned long long)rp.Rate(), (unsigned long long)rate);
    int64_t t0 = rp.LastChangeNs();
    const DcqcnEvent want[] = {DcqcnEvent::FastRecovery, DcqcnEvent::FastRecovery,
                               DcqcnEvent::AdditiveIncrease, DcqcnEvent::HyperIncrease,
                               DcqcnEvent::HyperIncrease};
    for (int k = 0; k < 5; k++)
    {
        int64_t at = t0 + (k + 1) * c.rpTimerNs;
        CHECK(rp.NextEvent() == at, "timer %d at %lld, next %lld", k, (long long)at,
              (long long)rp.NextEvent());
        rp.Advance(at);
        if (want[k] == DcqcnEvent::AdditiveIncrease)
            target = std::min(LINE, target + c.rateAiBps);
        if (want[k] == DcqcnEvent::HyperIncrease)
            target = std::min(LINE, target + c.rateHaiBps);
        rate = rate / 2 + target / 2 + ((rate | target) & 1); // midpoint, rounded up
        CHECK(rp.LastEvent() == want[k], "stage %d: %s", k, DcqcnEventName(rp.LastEvent()));
        CHECK(rp.Rate() == rate && rp.Target() == target, "stage %d: rate %llu/%llu target %llu/%llu",
              k, (unsigned long long)rp.Rate(), (unsigned long long)rate,
              (unsigned long long)rp.Target(), (unsigned long long)target);
    }
    std::printf("ok recovery: 2 fast recoveries, additive +%llu, hyper +%llu every %lld ns\n",
                (unsigned long long)c.rateAiBps, (unsigned long long)c.rateHaiBps,
                (long long)c.rpTimerNs);
}

static void
the_rate_never_drops_below_min_rate_and_returns_to_line_rate_when_cnps_stop()
{
    DcqcnConfig c = Simai();
    DcqcnRp rp(c, LINE);
    int64_t t = 0;
    for (int i = 0; i < 400; i++, t += 4000)
    {
        rp.OnCnp(t);
        rp.Advance(t + 3999);
    }
    CHECK(rp.Rate() == c.minRateBps, "rate %llu", (unsigned long long)rp.Rate());
    int steps = 0;
    for (int64_t e = rp.NextEvent(); e >= 0; e = rp.NextEvent(), steps++)
        rp.Advance(e);
    CHECK(rp.Rate() == LINE && rp.Target() == LINE, "recovered to %llu",
          (unsigned long long)rp.Rate());
    CHECK(steps < 10000, "%d increase events", steps);
    std::printf("ok floor MIN_RATE, back at line rate after %d increases, then no timer\n", steps);
}

static void
the_byte_counter_adds_increase_events_per_counted_bytes()
{
    DcqcnConfig c = Simai();
    c.byteCounter = 64000;
    DcqcnRp rp(c, LINE);
    rp.OnCnp(0);
    rp.Advance(4001);
    uint64_t rate = rp.Rate(), target = rp.Target();
    CHECK(!rp.OnSent(5000, 63999), "below the counter");
    CHECK(rp.OnSent(5001, 1), "the 64,000th byte");
    rate = rate / 2 + target / 2 + ((rate | target) & 1); // midpoint, rounded up
    CHECK(rp.Rate() == rate && rp.LastEvent() == DcqcnEvent::FastRecovery,
          "fast recovery from the byte counter");
    CHECK(rp.ByteStage() == 1 && rp.TimerStage() == 0, "BC %u T %u", rp.ByteStage(),
          rp.TimerStage());
    std::printf("ok byte counter every %llu B\n", (unsigned long long)c.byteCounter);
}

int
main()
{
    a_queue_pair_starts_at_line_rate_with_no_timer();
    the_first_cnp_cuts_the_rate_by_alpha_over_two_at_the_next_decrease_check();
    a_later_cnp_raises_alpha_by_g_and_cuts_again_by_the_new_alpha_over_two();
    cnps_between_two_checks_make_one_decrease();
    alpha_decays_by_one_minus_g_per_interval_without_cnps();
    recovery_runs_fast_recovery_then_additive_then_hyper_increase_every_rp_timer();
    the_rate_never_drops_below_min_rate_and_returns_to_line_rate_when_cnps_stop();
    the_byte_counter_adds_increase_events_per_counted_bytes();
    std::printf("all %d checks passed\n", g_checks);
    return 0;
}
