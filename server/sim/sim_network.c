/* The network and device model of cohort-sim; see sim_network.h. */
#include "sim_network.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "nn_rng.h"

/* Rounded medians, not measurements of ours (docs/simulation.md, "Presets",
 * has the sources):
 * - 4g: a phone on LTE. Ookla's Speedtest Global Index (2023) puts the
 *   global median of mobile links near 40-50 Mbit/s down and 10 Mbit/s up
 *   with 4G and 5G together, OpenSignal's 4G-only reports near 10-40 Mbit/s
 *   down; latency 40-60 ms. We take 20 / 8 Mbit/s and 50 ms, and a wide
 *   spread (sigma 0.8: a tenth of the clients below a third of the
 *   median), as FedScale's device traces show (Lai et al., ICML 2022).
 *   Training speed: a phone CPU sustains a few GFLOP/s in practice (AI
 *   Benchmark, Ignatov et al. 2019): 2 GFLOP/s.
 * - wifi: a phone or laptop on home broadband: Ookla's fixed-broadband
 *   median near 90 Mbit/s down and 40 up; over Wi-Fi less, 60 / 20 Mbit/s,
 *   15 ms; 5 GFLOP/s.
 * - datacenter: servers on 10 GbE in one site, 0.25 ms one way, 50 GFLOP/s
 *   of training, little spread (cross-silo federations, or a check of the
 *   algorithm without the network). */
static const sim_net_spec PRESETS[] = {
    {"4g", 20, 8, 50, 2, 0.8, 0.4, 0.5, 0, 0, 0},
    {"wifi", 60, 20, 15, 5, 0.6, 0.4, 0.5, 0, 0, 0},
    {"datacenter", 10000, 10000, 0.25, 50, 0.1, 0.1, 0.1, 0, 0, 0},
};
#define N_PRESETS (sizeof PRESETS / sizeof PRESETS[0])

const char *sim_net_presets(void) { return "4g, wifi, datacenter"; }

const char *sim_drop_name(sim_drop d) {
  switch (d) {
  case SIM_DROP_NONE:
    return "none";
  case SIM_DROP_DOWNLOAD:
    return "download";
  case SIM_DROP_TRAIN:
    return "train";
  case SIM_DROP_UPLOAD:
    return "upload";
  }
  return "?";
}

/* key=value overrides: the field and its accepted range. */
typedef struct net_key {
  const char *name;
  size_t offset;
  double min, max; /* min exclusive when positive */
  int positive;
} net_key;

static const net_key KEYS[] = {
    {"down", offsetof(sim_net_spec, down_mbps), 0, 1e7, 1},
    {"up", offsetof(sim_net_spec, up_mbps), 0, 1e7, 1},
    {"latency", offsetof(sim_net_spec, latency_ms), 0, 1e6, 0},
    {"gflops", offsetof(sim_net_spec, gflops), 0, 1e9, 1},
    {"sigma-bandwidth", offsetof(sim_net_spec, sigma_bandwidth), 0, 5, 0},
    {"sigma-latency", offsetof(sim_net_spec, sigma_latency), 0, 5, 0},
    {"sigma-compute", offsetof(sim_net_spec, sigma_compute), 0, 5, 0},
    {"drop-download", offsetof(sim_net_spec, drop_download), 0, 0.999, 0},
    {"drop-train", offsetof(sim_net_spec, drop_train), 0, 0.999, 0},
    {"drop-upload", offsetof(sim_net_spec, drop_upload), 0, 0.999, 0},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static int set_key(sim_net_spec *s, const char *kv, size_t len, char *err,
                   size_t errlen) {
  const char *eq = memchr(kv, '=', len);
  size_t klen = eq ? (size_t)(eq - kv) : len;
  for (size_t i = 0; i < N_KEYS; i++) {
    if (strlen(KEYS[i].name) != klen || strncmp(KEYS[i].name, kv, klen) != 0)
      continue;
    char text[64];
    size_t vlen = eq ? len - klen - 1 : 0;
    if (!eq || vlen == 0 || vlen >= sizeof text)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--network: '%.*s' needs a value (%s=NUMBER)",
                         (int)len, kv, KEYS[i].name);
    memcpy(text, eq + 1, vlen);
    text[vlen] = '\0';
    char *end = NULL;
    double v = strtod(text, &end);
    int bad = end == text || *end != '\0' || !isfinite(v) || v < KEYS[i].min ||
              v > KEYS[i].max || (KEYS[i].positive && v <= 0);
    if (bad)
      return errbuf_fail(
          err, errlen, COHORT_EINVAL, NULL,
          "--network: %s=%s is out of range (%s %g to %g)", KEYS[i].name, text,
          KEYS[i].positive ? "above" : "from", KEYS[i].min, KEYS[i].max);
    *(double *)(void *)((char *)s + KEYS[i].offset) = v;
    return COHORT_OK;
  }
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "--network: unknown key '%.*s' (known: down, up, "
                     "latency, gflops, sigma-bandwidth, sigma-latency, "
                     "sigma-compute, drop-download, drop-train, drop-upload)",
                     (int)klen, kv);
}

int sim_net_parse(const char *spec, sim_net_spec *out, char *err,
                  size_t errlen) {
  if (!spec)
    spec = "";
  size_t nlen = strcspn(spec, ",");
  const sim_net_spec *preset = NULL;
  for (size_t i = 0; i < N_PRESETS; i++)
    if (strlen(PRESETS[i].name) == nlen &&
        strncmp(PRESETS[i].name, spec, nlen) == 0)
      preset = &PRESETS[i];
  if (!preset)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--network: unknown preset '%.*s' (known: %s, each "
                       "optionally followed by ,key=value)",
                       (int)(nlen < 40 ? nlen : 40), spec, sim_net_presets());
  sim_net_spec s = *preset;
  const char *p = spec + nlen;
  while (*p == ',') {
    p++;
    size_t len = strcspn(p, ",");
    int rc = set_key(&s, p, len, err, errlen);
    if (rc)
      return rc;
    p += len;
  }
  *out = s;
  return COHORT_OK;
}

/* median * exp(sigma * N(0, 1)). */
static double log_normal(nn_rng *r, double median, double sigma) {
  return median * exp(sigma * nn_rng_normal(r));
}

/* Streams of the seed kept apart from the partitioner's and the trainer's. */
#define STREAM_DEVICE 0x5e7d0001u
#define STREAM_TRIP 0x5e7d0002u

void sim_net_device(const sim_net_spec *s, uint64_t seed, int64_t client,
                    sim_device *out) {
  nn_rng r;
  nn_rng_seed(&r,
              nn_rng_mix(nn_rng_mix(seed, STREAM_DEVICE), (uint64_t)client));
  out->down_Bps = log_normal(&r, s->down_mbps, s->sigma_bandwidth) * 1e6 / 8;
  out->up_Bps = log_normal(&r, s->up_mbps, s->sigma_bandwidth) * 1e6 / 8;
  out->latency_s = log_normal(&r, s->latency_ms, s->sigma_latency) / 1000;
  out->flops = log_normal(&r, s->gflops, s->sigma_compute) * 1e9;
}

void sim_net_trip(const sim_net_spec *s, const sim_device *d, uint64_t seed,
                  int64_t round, int64_t client, double down_bytes,
                  double train_flops, double up_bytes, sim_trip *out) {
  nn_rng r;
  nn_rng_seed(
      &r, nn_rng_mix(nn_rng_mix(nn_rng_mix(seed, STREAM_TRIP), (uint64_t)round),
                     (uint64_t)client));
  /* All three drawn every time, so one phase's probability does not shift
   * the draws of another. */
  double u_down = nn_rng_uniform(&r), u_train = nn_rng_uniform(&r),
         u_up = nn_rng_uniform(&r);
  memset(out, 0, sizeof *out);
  out->downloaded_s = d->latency_s + down_bytes / d->down_Bps;
  out->trained_s = out->downloaded_s + train_flops / d->flops;
  out->arrived_s = out->trained_s + up_bytes / d->up_Bps + d->latency_s;
  if (u_down < s->drop_download)
    out->drop = SIM_DROP_DOWNLOAD;
  else if (u_train < s->drop_train)
    out->drop = SIM_DROP_TRAIN;
  else if (u_up < s->drop_upload)
    out->drop = SIM_DROP_UPLOAD;
}

double sim_net_exchange_s(const sim_device *d, double up_bytes,
                          double down_bytes) {
  return 2 * d->latency_s + up_bytes / d->up_Bps + down_bytes / d->down_Bps;
}
