/* Seeds of fuzz_rpc: one valid call of each method (fuzz_rpc.h), with the
 * bearer each needs, and a whole fp32 update for round 1. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crypto.h"
#include "fuzz_corpus.h"
#include "fuzz_rpc.h"
#include "pb.h"
#include "sign.h"
#include "wire.h"

/* Writes m, packed, behind the header byte of method and bearer. */
static void call(const char *name, unsigned method, unsigned bearer,
                 const ProtobufCMessage *m) {
  uint8_t *body = NULL, header = FUZZ_RPC_HEADER(method, bearer);
  size_t len = 0;
  if (pb_pack(m, &body, &len))
    exit(1);
  corpus_write("fuzz_rpc", name, &header, 1, body, len);
  free(body);
}

/* fuzz_admit: peer names as gRPC gives them, each with an authorization
 * value (fuzz_admit.c: the peer, a NUL, the value). */
static void admit_seeds(void) {
  static const struct {
    const char *name, *peer, *value;
  } seeds[] = {
      {"ipv4_bearer", "ipv4:127.0.0.1:40312", "Bearer 0123456789abcdef"},
      {"ipv6_bearer", "ipv6:[::1]:50051", "Bearer x"},
      {"ipv6_encoded_zone", "ipv6:%5Bfe80::1%25eth0%5D:7", "Bearer y"},
      {"ipv6_mapped_ipv4", "ipv6:[::ffff:10.0.0.7]:443", "Bearer z"},
      {"unix_basic", "unix:/tmp/cohort.sock", "Basic dXNlcjpwYXNz"},
      {"no_port_empty_token", "ipv4:10.0.0.7", "Bearer "},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
    corpus_write("fuzz_admit", seeds[i].name, seeds[i].peer,
                 strlen(seeds[i].peer) + 1, seeds[i].value,
                 strlen(seeds[i].value));
}

void corpus_rpc(void) {
  admit_seeds();
  /* The indices of service_methods(). */
  enum { REGISTER, CHECKIN, GETMODEL, UPLOAD, REPORT, SECAGG };
  uint8_t seed[SIGN_SEED_LEN], pub[SIGN_PUBLIC_LEN];
  memset(seed, 9, sizeof seed);
  sign_key *k = NULL;
  uint8_t proof[SIGN_LEN];
  /* Signed now: a proof more than ROUND_POSSESSION_SKEW_S old is refused
   * after its signature is checked, which is still the costly path. */
  int64_t now_ms = (int64_t)(clock_wall_s() * 1000.0);
  if (sign_key_from_seed(seed, &k) ||
      sign_possession(k, FUZZ_RPC_ENROLL, now_ms, proof))
    exit(1);
  sign_key_public(k, pub);
  sign_key_free(k);

  Cohort__V1__ClientFacts facts = COHORT__V1__CLIENT_FACTS__INIT;
  facts.platform = "linux-x86_64";
  Cohort__V1__RegisterRequest reg = COHORT__V1__REGISTER_REQUEST__INIT;
  reg.enrollment_token = FUZZ_RPC_ENROLL;
  reg.facts = &facts;
  reg.identity_key.data = pub;
  reg.identity_key.len = sizeof pub;
  call("register", REGISTER, FUZZ_BEARER_NONE, &reg.base);
  reg.possession.data = proof;
  reg.possession.len = sizeof proof;
  reg.possession_time_ms = now_ms;
  call("register-proven", REGISTER, FUZZ_BEARER_NONE, &reg.base);
  reg.possession.len = 0;

  Cohort__V1__Metric charging = COHORT__V1__METRIC__INIT, *attrs[1];
  charging.name = "charging";
  charging.value = 1;
  attrs[0] = &charging;
  Cohort__V1__CheckInRequest ci = COHORT__V1__CHECK_IN_REQUEST__INIT;
  ci.num_examples = 100;
  ci.n_attributes = 1;
  ci.attributes = attrs;
  call("checkin", CHECKIN, FUZZ_BEARER_CLIENT1, &ci.base);

  Cohort__V1__GetModelRequest gm = COHORT__V1__GET_MODEL_REQUEST__INIT;
  gm.model_version = 1;
  gm.max_bytes = 16;
  call("get_model", GETMODEL, FUZZ_BEARER_CLIENT2, &gm.base);

  float delta[FUZZ_RPC_PARAMS];
  uint8_t blob[sizeof delta], sha[CRYPTO_SHA256_LEN];
  for (int i = 0; i < FUZZ_RPC_PARAMS; i++)
    delta[i] = 0.01f * (float)(i - 5);
  wire_put_f32le(blob, delta, FUZZ_RPC_PARAMS);
  crypto_sha256(blob, sizeof blob, sha);
  Cohort__V1__Metric loss = COHORT__V1__METRIC__INIT, *metrics[1];
  loss.name = "loss";
  loss.value = 0.5;
  metrics[0] = &loss;
  Cohort__V1__UploadRequest up = COHORT__V1__UPLOAD_REQUEST__INIT;
  up.round = 1;
  up.total_size = sizeof blob;
  up.data.data = blob;
  up.data.len = sizeof blob;
  up.update_sha256.data = sha;
  up.update_sha256.len = sizeof sha;
  up.num_examples = 50;
  up.n_metrics = 1;
  up.metrics = metrics;
  call("upload_whole", UPLOAD, FUZZ_BEARER_CLIENT1, &up.base);
  up.data.len = sizeof blob / 2;
  call("upload_first_half", UPLOAD, FUZZ_BEARER_CLIENT2, &up.base);

  Cohort__V1__ReportRequest rr = COHORT__V1__REPORT_REQUEST__INIT;
  rr.round = 1;
  rr.num_examples = 20;
  rr.n_metrics = 1;
  rr.metrics = metrics;
  call("report", REPORT, FUZZ_BEARER_CLIENT1, &rr.base);

  Cohort__V1__SecAggRequest sa = COHORT__V1__SEC_AGG_REQUEST__INIT;
  sa.round = 1;
  sa.step = COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP;
  call("secagg_setup", SECAGG, FUZZ_BEARER_CLIENT2, &sa.base);
}
