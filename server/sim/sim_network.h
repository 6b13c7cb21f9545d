/* cohort-sim's network and device model (docs/simulation.md, "Network
 * model"): each virtual client gets a downlink, an uplink, a latency and a
 * training speed drawn once from log-normal distributions around a preset's
 * medians, and in each round may drop out while downloading, training or
 * uploading. A client's time in a round is
 *   latency + model bytes / downlink + training FLOPs / speed
 *           + update bytes / uplink + latency.
 * Everything is drawn from the run's seed (nn_rng), so a seed gives the same
 * devices and the same dropouts in every run. Pure: no clock, no I/O. */
#ifndef COHORT_SIM_NETWORK_H
#define COHORT_SIM_NETWORK_H

#include <stddef.h>
#include <stdint.h>

/* A --network value: the medians and spreads of the population. */
typedef struct sim_net_spec {
  char name[32];          /* the preset's name */
  double down_mbps;       /* median downlink, megabits per second */
  double up_mbps;         /* median uplink */
  double latency_ms;      /* median one-way latency */
  double gflops;          /* median training speed, GFLOP/s */
  double sigma_bandwidth; /* log-normal sigma of both links */
  double sigma_latency;   /* ... of the latency */
  double sigma_compute;   /* ... of the training speed */
  double drop_download;   /* probability a client drops while downloading */
  double drop_train;      /* ... while training */
  double drop_upload;     /* ... while uploading */
} sim_net_spec;

/* Parses "PRESET[,key=value...]": PRESET is 4g, wifi or datacenter; the
 * keys down, up (Mbit/s), latency (ms), gflops, sigma-bandwidth,
 * sigma-latency, sigma-compute and drop-download, drop-train, drop-upload
 * (probabilities in [0, 1)) override the preset's values. COHORT_EINVAL
 * with a one-line reason naming the part that is wrong. */
int sim_net_parse(const char *spec, sim_net_spec *out, char *err,
                  size_t errlen);

/* The preset names, for --help: "4g, wifi, datacenter". */
const char *sim_net_presets(void);

/* One virtual client's device, drawn once per (seed, client). */
typedef struct sim_device {
  double down_Bps, up_Bps; /* bytes per second */
  double latency_s;
  double flops; /* per second, training */
} sim_device;

void sim_net_device(const sim_net_spec *s, uint64_t seed, int64_t client,
                    sim_device *out);

typedef enum sim_drop {
  SIM_DROP_NONE = 0,
  SIM_DROP_DOWNLOAD, /* never starts training */
  SIM_DROP_TRAIN,    /* downloads, never uploads */
  SIM_DROP_UPLOAD,   /* trains, never finishes its upload */
} sim_drop;

const char *sim_drop_name(sim_drop d);

/* A client's round trip in one round: when each phase ends, in seconds
 * after it got its task; the phases after a dropout are not taken. */
typedef struct sim_trip {
  sim_drop drop;
  double downloaded_s; /* latency + down_bytes / downlink */
  double trained_s;    /* + train_flops / speed */
  double arrived_s;    /* + up_bytes / uplink + latency: the update is in */
} sim_trip;

/* The trip of client in round for the given sizes; the dropout is drawn
 * from (seed, round, client), phase by phase. */
void sim_net_trip(const sim_net_spec *s, const sim_device *d, uint64_t seed,
                  int64_t round, int64_t client, double down_bytes,
                  double train_flops, double up_bytes, sim_trip *out);

/* Time of one exchange of up_bytes and down_bytes (a secure-aggregation
 * message and its reply): both latencies plus both transfers. */
double sim_net_exchange_s(const sim_device *d, double up_bytes,
                          double down_bytes);

#endif
