/* The round engine's side of update codecs: the codec of the federation,
 * each training round's seed, the size an upload must have, decoding an
 * upload into the domain the aggregate sums in, and the once-per-round map
 * back to a model delta with the codec's coordinator state (FetchSGD's
 * sketches), which is committed with the model. Called with e->mu held,
 * except round_codec_finish (AGGREGATING, lock dropped) and
 * round_codec_decode (on a copy of the round's parameters). */
#include <grpc/status.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "log.h"
#include "round_internal.h"

int round_codec_setup(round_engine *e, char *err, size_t errlen) {
  const char *spec = e->cfg.codec_spec ? e->cfg.codec_spec : "fp32";
  char why[200];
  if (codec_parse(spec, &e->codec, why, sizeof why))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "--codec: %s", why);
  if (!(e->cfg.codec_clip >= 0) || e->cfg.codec_clip > 1e6)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--codec-clip %g must be in [0, 1e6] (0: each "
                       "client scales its own payload)",
                       e->cfg.codec_clip);
  e->cparams.dim = e->model.n_params;
  e->cparams.clip = (float)e->cfg.codec_clip;
  if (codec_wire_size(e->codec, &e->cparams) == 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--codec %s keeps nothing of a %zu-parameter model",
                       codec_spec(e->codec), e->cparams.dim);
  /* Mean-based strategies sum decoded payloads where the codec is linear
   * and map the mean back once (for a sketch, heavy hitters are recovered
   * from the summed sketch, as FetchSGD does); the robust ones need each
   * client's own delta. */
  e->agg_linear = strategy_aggregation(e->strategy) == AGG_MEAN;
  e->agg_dim =
      e->agg_linear ? codec_linear_dim(e->codec, &e->cparams) : e->cparams.dim;
  if (codec_state_bytes(e->codec, &e->cparams) > 0) {
    if (!e->agg_linear)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "--codec %s keeps sketch state on the coordinator, "
                         "which needs a mean-based --strategy, not %s",
                         codec_spec(e->codec),
                         strategy_name(e->cfg.strategy.kind));
    e->cstate = codec_state_new(e->codec, &e->cparams);
    if (!e->cstate)
      return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                         "cannot allocate the codec's sketch state");
  }
  return COHORT_OK;
}

void round_codec_free(round_engine *e) {
  codec_state_free(e->cstate);
  codec_free(e->codec);
}

int round_codec_load_state(round_engine *e) {
  if (!e->cstate)
    return COHORT_OK;
  uint8_t *blob = NULL;
  size_t len = 0;
  int rc = store_codec_state_get(e->db, e->version, &blob, &len);
  if (rc == COHORT_ENOTFOUND)
    return COHORT_OK;
  if (rc)
    return rc;
  if (codec_state_load(e->cstate, blob, len))
    log_warn("codec state of model %lld does not fit --codec %s; starting "
             "fresh",
             (long long)e->version, codec_spec(e->codec));
  free(blob);
  return COHORT_OK;
}

size_t round_codec_state_len(const round_engine *e) {
  return e->cstate ? codec_state_bytes(e->codec, &e->cparams) : 0;
}

void round_codec_copy_state(const round_engine *e, uint8_t *out) {
  if (e->cstate && out)
    codec_state_save(e->cstate, out);
}

void round_codec_restore_state(round_engine *e, const uint8_t *blob) {
  if (e->cstate && blob)
    codec_state_load(e->cstate, blob, round_codec_state_len(e));
}

int round_codec_new_round(round_engine *e, store_codec *out) {
  int rc = crypto_random(e->cparams.seed, sizeof e->cparams.seed);
  if (rc)
    return rc;
  snprintf(out->spec, sizeof out->spec, "%s", codec_spec(e->codec));
  crypto_hex(e->cparams.seed, sizeof e->cparams.seed, out->seed_hex);
  out->clip = e->cfg.codec_clip;
  return COHORT_OK;
}

int round_codec_resume(round_engine *e, const store_codec *sc, char *why,
                       size_t whylen) {
  /* A round from before codecs (schema 2) recorded none: it was fp32. */
  if (!sc->spec[0] && strcmp(codec_spec(e->codec), "fp32") == 0 &&
      e->cparams.clip == 0) {
    memset(e->cparams.seed, 0, sizeof e->cparams.seed);
    return COHORT_OK;
  }
  if (strcmp(sc->spec, codec_spec(e->codec)) != 0 ||
      (float)sc->clip != e->cparams.clip)
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL,
                       "its updates use codec '%s' with clip %g, not "
                       "--codec %s --codec-clip %g",
                       sc->spec, sc->clip, codec_spec(e->codec),
                       e->cfg.codec_clip);
  if (crypto_unhex(sc->seed_hex, e->cparams.seed, sizeof e->cparams.seed))
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL,
                       "its codec seed is unreadable");
  return COHORT_OK;
}

size_t round_codec_max_size(const round_engine *e) {
  return codec_wire_size(e->codec, &e->cparams);
}

round_verdict round_codec_check_size(const round_engine *e, uint64_t total) {
  size_t size = round_codec_max_size(e);
  if (codec_size_exact(e->codec) ? total == size : total > 0 && total <= size)
    return round_ok();
  return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                            "update has %llu bytes; the model's %zu elements "
                            "take %s%zu bytes with codec %s",
                            (unsigned long long)total, e->cparams.dim,
                            codec_size_exact(e->codec) ? "" : "1 to ", size,
                            codec_spec(e->codec));
}

int round_codec_decode(const round_engine *e, const codec_params *cp,
                       const uint8_t *payload, size_t len, float *out,
                       char *why, size_t whylen) {
  return e->agg_linear
             ? codec_decode_linear(e->codec, cp, payload, len, out, why, whylen)
             : codec_decode(e->codec, cp, payload, len, out, why, whylen);
}

int round_codec_finish(round_engine *e, const double *combined, double *delta,
                       char *why, size_t whylen) {
  if (!e->agg_linear) {
    memcpy(delta, combined, e->cparams.dim * sizeof *delta);
    return COHORT_OK;
  }
  return codec_finish(e->codec, &e->cparams, e->cstate, combined, delta, why,
                      whylen);
}
