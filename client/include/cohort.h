/* libcohort: the Cohort federated-learning client library.
 *
 * An app creates a client for a coordinator address and an enrollment
 * token, then either runs one check-in/download/train/upload cycle at a time
 * (cohort_client_run_once) or loops until the federation is over
 * (cohort_client_run). Local training is a callback; without one, the
 * built-in trainer trains the model the coordinator names on a dataset the
 * app loaded with cohort_dataset_load_idx. Only the difference between the
 * trained and the global model (the delta) leaves the device.
 *
 * Errors: every function returns a cohort_status (0 = COHORT_OK, negative on
 * failure; see cohort_status.h and cohort_strerror). Thread-safety: a client
 * handle is used by one thread at a time, except cohort_client_stop and
 * cohort_client_cancelled, which any thread may call. Distinct handles are
 * independent.
 *
 * ABI promise (docs/api/abi.md): an app built against the headers of one
 * release runs against any later library of the same major version
 * (SONAME libcohort.so.0 while MAJOR is 0), without rebuilding. A minor or
 * patch release may only add: new functions, new fields at the END of a
 * struct below, new enum values after the last one, new status codes.
 * Nothing is ever reordered, removed, retyped or renumbered. To make that
 * work, every struct an app allocates and the library reads says how big
 * the app thinks it is: its first member is struct_size, which the _init
 * macro sets to the app's sizeof; the library reads only the fields that
 * size covers and takes the defaults for the rest, and refuses a size
 * smaller than the first release's or larger than its own (COHORT_EINVAL,
 * reason in cohort_last_error). Structs the library hands to a callback
 * carry the library's struct_size: read a field added after the release
 * you built against only when COHORT_HAS_FIELD says the struct has it.
 * cohort_attribute, which apps keep in arrays, never changes. */
#ifndef COHORT_H
#define COHORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cohort_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers. An app compiled against them may run
 * against a newer library: compare with cohort_version_number() at run
 * time. COHORT_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH.
 * (CMake checks at configure time that these equal project(VERSION).) */
#define COHORT_VERSION_MAJOR 0
#define COHORT_VERSION_MINOR 1
#define COHORT_VERSION_PATCH 0
#define COHORT_VERSION_NUMBER                                                  \
  (COHORT_VERSION_MAJOR * 10000 + COHORT_VERSION_MINOR * 100 +                 \
   COHORT_VERSION_PATCH)
#define COHORT_VERSION "0.1.0"

/* The library's own version, as the macros above were when it was built:
 * "MAJOR.MINOR.PATCH" (static storage) and its number. */
COHORT_API const char *cohort_version(void);
COHORT_API unsigned cohort_version_number(void);

typedef struct cohort_client cohort_client_t;
typedef struct cohort_dataset cohort_dataset_t;

/* Whether a size-versioned struct s (a pointer) has field f: true when the
 * side that filled it in knew of f. */
#define COHORT_HAS_FIELD(s, f)                                                 \
  ((s)->struct_size >= offsetof(__typeof__(*(s)), f) + sizeof((s)->f))

/* Why the last call on this thread that failed without a client to keep
 * the reason (cohort_client_new, the _init functions, the dataset
 * loaders) failed: one line, "" if none. Thread-local; valid until the
 * thread's next such call. */
COHORT_API const char *cohort_last_error(void);

/* ---- datasets for the built-in trainer ---- */

/* Loads the IDX training set in dir ("train-images-idx3-ubyte[.gz]" and
 * "train-labels-idx1-ubyte[.gz]", as Debian's dataset-fashion-mnist
 * installs them) and keeps shard shard_index of shard_count contiguous,
 * near-equal shards (0 <= shard_index < shard_count); limit > 0 keeps only
 * the shard's first limit examples. On failure returns a negative status and
 * writes a one-line reason into err (errlen bytes, may be 0). The dataset is
 * owned by the caller: free it with cohort_dataset_free after every client
 * that borrows it. */
COHORT_API int cohort_dataset_load_idx(const char *dir, int shard_index,
                                       int shard_count, size_t limit,
                                       cohort_dataset_t **out, char *err,
                                       size_t errlen);
/* Where a client's data comes from and which share of it is its own. In a
 * simulated federation every client loads the same file with the same
 * partition, count and seed, and its own index, so the shares are disjoint
 * and together cover the data. */
typedef struct cohort_dataset_options {
  size_t struct_size;    /* set by cohort_dataset_options_init */
  const char *path;      /* an IDX folder (train-images-idx3-ubyte[.gz] and
                            train-labels-idx1-ubyte[.gz]) or a CSV file
                            (.csv or .csv.gz; label first, header detected,
                            features as they are) */
  const char *partition; /* "iid" (default), "shards:S" (sorted by label, S
                            shards per client), "labels:C" (C labels per
                            client, NIID-Bench's #C=k), "labelsets:0+6,1+6"
                            (each client's labels given), "dirichlet:ALPHA"
                            (label skew), "quantity:ALPHA" (size skew) */
  int client_index;      /* this client's share, in [0, client_count) */
  int client_count;      /* clients sharing the data (default 1: all of it) */
  uint64_t seed;         /* the partition's seed (same on every client) */
  size_t limit;          /* keep only the share's first limit examples;
                            0 = all */
  double holdout;        /* fraction of the share set aside (at random, from
                            the seed) for federated evaluation, in [0, 1);
                            0 = evaluate on the training examples */
} cohort_dataset_options;

/* Fills o with the defaults: iid, client 0 of 1, seed 0, no limit, and
 * struct_size with this header's sizeof. Returns COHORT_OK, or
 * COHORT_EINVAL for a size the library does not know (o is then left
 * alone). */
#define cohort_dataset_options_init(o)                                         \
  cohort_dataset_options_init_sized((o), sizeof *(o))
COHORT_API int cohort_dataset_options_init_sized(cohort_dataset_options *o,
                                                 size_t struct_size);

/* Loads o->path and keeps this client's share. The labels are read first
 * and only the share's examples after them, kept as bytes where the file
 * has bytes (IDX pixels, a CSV of integers 0..255): memory is the share
 * (784 bytes an image for Fashion-MNIST) and a byte a label, not the
 * file; training adds the model and one batch (docs/models.md). On failure
 * returns a negative status and writes a one-line reason (naming the file,
 * line or option) into err (errlen bytes, may be 0). Free the dataset with
 * cohort_dataset_free. */
COHORT_API int cohort_dataset_load(const cohort_dataset_options *o,
                                   cohort_dataset_t **out, char *err,
                                   size_t errlen);

/* Writes to f how o's partition splits o->path over all o->client_count
 * clients: one line per client with its example count and its count per
 * label, then the totals. Returns COHORT_OK or a negative status with a
 * reason in err. */
COHORT_API int cohort_dataset_partition_summary(const cohort_dataset_options *o,
                                                FILE *f, char *err,
                                                size_t errlen);

/* Fills features (the dataset's channels * height * width floats) with
 * example index, and *label with its class in [0, classes). Return 0, or
 * any other value when the example cannot be read. */
typedef int (*cohort_example_cb)(void *user, size_t index, float *features,
                                 int *label);

/* A dataset of n examples the app keeps in its own memory, for the
 * built-in trainer and federated evaluation (on the same examples: there
 * is no hold-out): no file. Each example has channels x height x width
 * features (a flat vector: d x 1 x 1) and a label in [0, classes). The
 * labels are read once, here (a byte each, kept); the features are
 * fetched through example one batch at a time while training and
 * evaluating, so the library holds one batch, never a copy of the data.
 * example is called on the thread that runs the client (and here, on the
 * caller's); it and user must stay valid until cohort_dataset_free. Lend
 * such a dataset to one client at a time. An example that cannot be read
 * here fails the load; one that fails later fails that round's training
 * (COHORT_ECALLBACK). Returns COHORT_OK,
 * COHORT_EINVAL (n is 0 or above 2^32, a shape or class count out of range,
 * a label outside [0, classes), a feature that is not finite: reason in
 * err) or COHORT_ENOMEM. Free the dataset with cohort_dataset_free. */
COHORT_API int cohort_dataset_from_callback(size_t n, int channels, int height,
                                            int width, int classes,
                                            cohort_example_cb example,
                                            void *user, cohort_dataset_t **out,
                                            char *err, size_t errlen);

/* Examples in the dataset (its training part). */
COHORT_API size_t cohort_dataset_size(const cohort_dataset_t *ds);
/* Accepts NULL. */
COHORT_API void cohort_dataset_free(cohort_dataset_t *ds);

/* ---- training callback ---- */

/* A task, as the library hands it to the training and the evaluation
 * callbacks (library to app: struct_size is the library's; see
 * COHORT_HAS_FIELD). */
typedef struct cohort_train_request {
  size_t struct_size;
  uint64_t round;         /* round the task belongs to */
  const char *model_spec; /* e.g. "logreg"; borrowed for the call */
  uint32_t epochs;        /* the training plan (unused by evaluation) */
  uint32_t batch_size;
  float learning_rate;
  float fedprox_mu; /* 0 = plain FedAvg */
  /* The shape of one example the model takes and its number of classes,
   * as the coordinator says (cohort-server --input, --classes); 0
   * when the coordinator is older than these fields. */
  uint32_t input_channels, input_height, input_width;
  uint32_t classes;
  /* The client running the task: a long callback polls
   * cohort_client_cancelled(client) and returns early (non-zero) once it
   * is set. */
  const cohort_client_t *client;
} cohort_train_request;

/* What the training callback reports (app to library: the library sets
 * struct_size and the defaults before the call; an app writes only the
 * fields it knows). */
typedef struct cohort_train_result {
  size_t struct_size;
  uint64_t num_examples; /* examples trained on; must be > 0 */
  double train_loss;     /* mean training loss, or NaN (default) */
} cohort_train_result;

/* Trains params in place: on entry they hold the n floats of the global
 * model; on return, the locally trained model. Return 0 on success; any
 * other value abandons this round's task (nothing is uploaded). Called on
 * the thread that runs the client. */
typedef int (*cohort_train_cb)(void *user, const cohort_train_request *req,
                               float *params, size_t n,
                               cohort_train_result *result);

/* ---- evaluation callback ---- */

/* What the evaluation callback reports (app to library, as
 * cohort_train_result). */
typedef struct cohort_eval_result {
  size_t struct_size;
  uint64_t num_examples; /* examples evaluated on; must be > 0 */
  double accuracy;       /* in [0, 1] */
  double loss;           /* mean loss, >= 0 */
} cohort_eval_result;

/* Evaluates the global model (the n floats of params, read-only) on the
 * app's held-out data for a federated-evaluation task (req's training plan
 * is unused). Return 0 to report the result; any other value declines the
 * task: the coordinator counts this client as declined, not failed.
 * Called on the thread that runs the client. */
typedef int (*cohort_eval_cb)(void *user, const cohort_train_request *req,
                              const float *params, size_t n,
                              cohort_eval_result *result);

/* ---- progress callback ---- */

typedef enum cohort_stage {
  COHORT_STAGE_DOWNLOAD = 0, /* the global model */
  COHORT_STAGE_TRAIN = 1,    /* local training */
  COHORT_STAGE_UPLOAD = 2,   /* the update */
  COHORT_STAGE_EVALUATE = 3, /* federated evaluation */
} cohort_stage;

/* Library to app. Counts the library does not know are 0. */
typedef struct cohort_progress {
  size_t struct_size;
  cohort_stage stage;
  uint64_t round;
  uint64_t bytes_done, bytes_total;       /* DOWNLOAD, UPLOAD */
  uint64_t examples_done, examples_total; /* TRAIN, EVALUATE */
  double fraction;                        /* of the stage, in [0, 1] */
} cohort_progress;

/* Called on the thread that runs the client when a stage starts (fraction
 * 0), as it goes (every chunk; every minibatch of the built-in trainer)
 * and when it ends (fraction 1). Keep it short: the client waits for it.
 * A train callback of the app's own reports only its start and end. */
typedef void (*cohort_progress_cb)(void *user, const cohort_progress *p);

/* ---- client ---- */

/* A condition the client reports at check-in, which the coordinator may
 * require for selection (cohort-server --eligible "charging=1"). Names are
 * 1-32 characters of [a-z0-9_.]; "examples" is always reported. */
typedef struct cohort_attribute {
  const char *name;
  double value;
} cohort_attribute;

/* Polled before every check-in: fills up to cap attributes with the
 * device's conditions now (a phone that stopped charging says so) and
 * returns how many it filled, or a negative value to skip this check-in:
 * the cycle then asks the coordinator nothing and ends as RETRY after
 * 1000 ms, not_selected saying the callback skipped it. An attribute
 * without a name, or more than 16 in all, ends the cycle with
 * COHORT_ECALLBACK. They complement the static
 * cohort_client_options.attributes; a name in both takes the callback's
 * value. Names must stay valid until the cycle ends. not_selected is why
 * the coordinator did not select this client at the previous check-in
 * ("" when it did, or said nothing). Called on the thread that runs the
 * client. */
typedef int (*cohort_eligibility_cb)(void *user, const char *not_selected,
                                     cohort_attribute *attrs, size_t cap);

/* A step of secure aggregation (docs/secagg.md), for the testing aid
 * cohort_client_options.leave_before_secagg. */
typedef enum cohort_secagg_step {
  COHORT_SECAGG_NEVER = 0,
  COHORT_SECAGG_SETUP = 1,       /* asking for the round's plan */
  COHORT_SECAGG_ADVERTISE = 2,   /* sending its public keys */
  COHORT_SECAGG_SHARE = 3,       /* sending its sealed key shares */
  COHORT_SECAGG_MASKED = 4,      /* uploading its masked input */
  COHORT_SECAGG_UNMASK = 5,      /* revealing shares for the unmasking */
  COHORT_SECAGG_CONSISTENCY = 6, /* attesting to the survivor list (comes
                                    before UNMASK) */
} cohort_secagg_step;

typedef struct cohort_client_options {
  size_t struct_size;           /* set by cohort_client_options_init */
  const char *server;           /* "HOST:PORT" of the coordinator; required */
  const char *enrollment_token; /* required; copied */
  const char *platform;         /* reported at registration; may be NULL */
  cohort_train_cb train;        /* NULL: the built-in trainer */
  void *train_user;             /* passed to train */
  cohort_dataset_t *dataset;    /* borrowed: the built-in trainer's data and
                                   the local evaluation set; may be NULL
                                   when train is set */
  const cohort_attribute *attributes; /* reported at check-in; copied */
  size_t n_attributes;                /* at most 16 */
  uint64_t seed;                      /* shuffling seed of the built-in trainer
                                         (mixed with the dataset's client index
                                         and the round) */
  int threads;            /* threads of the built-in trainer; 0 = all
                             cores. Process-wide: the last client
                             created sets it */
  int rpc_timeout_ms;     /* deadline of each call (default 30000) */
  double give_up_after_s; /* cohort_client_run gives up once the
                             coordinator has been unreachable this
                             long (default 300; each call's retries
                             end with it too, so run returns within
                             about this plus one rpc_timeout_ms) */
  /* Testing aid, for checking how a deployment copes with clients that
   * drop out of secure aggregation: in the first secure-aggregation round
   * this client takes part in, it leaves right before sending this step's
   * message; the cycle then returns COHORT_ECANCELED (and so does
   * cohort_client_run) with last_error naming the step. Never set it in
   * production. Default COHORT_SECAGG_NEVER. */
  cohort_secagg_step leave_before_secagg;
  /* What this client demands of a secure-aggregation round's plan, whatever
   * the coordinator says (docs/security.md): it refuses a threshold below
   * what these need at the plan's degree, and a degree that leaves the
   * honest clients disconnected. The coordinator it defends against:
   * "semi-malicious" (default, NULL) or "curious" (only for a coordinator
   * the app trusts to follow the protocol); the fraction of clients it
   * assumes corrupt, [0, 1) (default 0.05); the security goal in bits,
   * 1..128 (default 40); the colluding clients it assumes a coordinator
   * could place around it, which t must exceed whatever the odds (default
   * 0). Raise them to demand more than the defaults. */
  const char *secagg_adversary;
  double secagg_corrupt;
  unsigned secagg_security_bits;
  unsigned secagg_colluders;
  /* Distributed DP: the most epsilon this client lets a round's plan
   * spend, at delta 1e-5 (or at the plan's delta when smaller: a plan
   * that publishes a larger delta is weighed at 1e-5); a plan that spends
   * more is refused before any message (docs/privacy.md). 0 (default):
   * any, as long as the plan's noise buys the epsilon it publishes. */
  double dp_max_epsilon;
  /* Long-poll check-in (docs/protocol.md): the longest, in ms, a check-in
   * asks the coordinator to hold the call while it has no task for this
   * client, so a task reaches it as soon as there is one. The call's
   * deadline is this plus rpc_timeout_ms. 0 (default): 30000; negative: no
   * long poll (the coordinator answers at once). */
  int long_poll_ms;
  /* TLS to the coordinator (docs/security.md, "Transport"). With tls set
   * or tls_ca_file given, the coordinator's certificate must chain to the
   * CA in tls_ca_file (PEM), or without one to the system trust store
   * ($GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else Debian's
   * /etc/ssl/certs/ca-certificates.crt), and name the host of server;
   * nothing is pinned. tls_cert_file and tls_key_file (PEM, both or
   * neither; the key mode 0600): this client's certificate, for a
   * coordinator that requires one (mTLS). The files are read by
   * cohort_client_new; a missing or wrong one makes it fail with
   * COHORT_EINVAL and a logged reason naming the file. Default (all unset):
   * plaintext, which a coordinator serves only on loopback or with
   * --insecure. A handshake that fails (wrong CA, no or a refused client
   * certificate, TLS against plaintext) ends the cycle with COHORT_EAUTH
   * and a last_error that says which. */
  int tls;
  const char *tls_ca_file;
  const char *tls_cert_file;
  const char *tls_key_file;
  /* ---- the end of the first release's fields (struct_size at least
   * COHORT_CLIENT_OPTIONS_SIZE_0_1); fields after this take their defaults
   * for an app whose struct_size does not cover them. ---- */
  /* Evaluates the global model for federated-evaluation tasks; NULL (the
   * default): the built-in evaluation on dataset, and without a dataset
   * such tasks are declined (the coordinator counts a decline, not a
   * failure). */
  cohort_eval_cb evaluate;
  void *evaluate_user;
  /* Progress of each download, training, upload and evaluation; NULL
   * (default): none. */
  cohort_progress_cb progress;
  void *progress_user;
  /* Attributes polled before each check-in, and why the coordinator did
   * not select this client; NULL (default): only the static attributes. */
  cohort_eligibility_cb eligibility;
  void *eligibility_user;
} cohort_client_options;

/* The size of cohort_client_options in the first size-versioned release:
 * the smallest struct_size the library accepts. */
#define COHORT_CLIENT_OPTIONS_SIZE_0_1                                         \
  (offsetof(cohort_client_options, tls_key_file) + sizeof(const char *))

/* Fills o with the defaults and struct_size with this header's sizeof; set
 * server and enrollment_token after. Returns COHORT_OK, or COHORT_EINVAL
 * for a size the library does not know (o is then left alone). */
#define cohort_client_options_init(o)                                          \
  cohort_client_options_init_sized((o), sizeof *(o))
COHORT_API int cohort_client_options_init_sized(cohort_client_options *o,
                                                size_t struct_size);

/* Creates a client (no network traffic yet; it registers on first use).
 * Reads the fields of o that o->struct_size covers; the others take their
 * defaults. Returns COHORT_OK, COHORT_EINVAL (a struct_size smaller than
 * COHORT_CLIENT_OPTIONS_SIZE_0_1 or larger than the library's, missing
 * server or token, neither a callback nor a dataset, a bad value: the
 * reason in cohort_last_error) or COHORT_ENOMEM. */
COHORT_API int cohort_client_new(const cohort_client_options *o,
                                 cohort_client_t **out);
/* Accepts NULL. Wipes the client's identity key and tokens. */
COHORT_API void cohort_client_free(cohort_client_t *c);

/* ---- identity (docs/security.md) ----
 * Every client registers with an Ed25519 identity key, which the
 * coordinator binds to its client id and hands to its peers in secure
 * aggregation. Without a key file the client makes a fresh key from the
 * CSPRNG each time it registers. The library never writes a private key
 * anywhere nor logs one; file paths are read, not kept. Like the other
 * calls on c, these are for one thread at a time. */

/* Gives c a persistent identity: key_path is an Ed25519 private key in PEM
 * (`cohort enroll keygen` writes one, mode 0600), cert_path the enrollment
 * authority's certificate of it as hex (`cohort enroll certify`), or NULL.
 * A coordinator started with --enroll-authority registers only certified
 * keys, and one key registers one client: a second client, or this one
 * registering again with the same database, is refused. Call it before
 * the first cycle. The key stays in c's memory until cohort_client_free.
 * Returns COHORT_OK, COHORT_EINVAL (NULL c or key_path), COHORT_ESTATE (c
 * has registered already), COHORT_EIO (a file cannot be read, or is not
 * a regular file), COHORT_EFORMAT (not an unencrypted Ed25519 private key:
 * no passphrase is ever asked for; not 128 hex digits) or
 * COHORT_EAUTH (the certificate does not certify this key under the
 * authority given to cohort_client_set_enroll_authority); the reason,
 * naming the file, is in cohort_client_last_error. On failure c keeps the
 * identity it had. */
COHORT_API int cohort_client_set_identity(cohort_client_t *c,
                                          const char *key_path,
                                          const char *cert_path);

/* The enrollment authority c's peers must be certified by: path holds the
 * authority's Ed25519 public key as 64 hex digits (the FILE.pub of
 * `cohort enroll authority`). c keeps it for secure aggregation, to check
 * each peer's identity key against it, so that a coordinator cannot fill a
 * round with clients of its own making (docs/security.md).
 * A certificate given to cohort_client_set_identity must verify under it.
 * Returns COHORT_OK, COHORT_EINVAL, COHORT_EIO, COHORT_EFORMAT (not 64
 * hex digits, or not a usable Ed25519 public key) or COHORT_EAUTH, with
 * the reason in cohort_client_last_error; on failure c keeps the authority
 * it had. */
COHORT_API int cohort_client_set_enroll_authority(cohort_client_t *c,
                                                  const char *path);

/* ---- sessions that survive a restart (docs/tokens.md, "Saved sessions")
 * Without one of these, every cohort_client_new is a new client to the
 * coordinator: an app restarted mid-round registers again and can be
 * counted twice in that round. With one, the client saves what makes it
 * itself (the coordinator's address, its client id, its session token and
 * its Ed25519 identity key) after each registration, and a later client
 * with the same store takes it up instead of registering. It registers
 * again only when the coordinator says the session is gone: expired (the
 * same client id gets a new session, the same key), or unknown (a replaced
 * database: a new client id); then the new session is saved. A revoked
 * client stops, as without a store, and a later start with the same saved
 * session stops again: delete the file (or the stored bytes) to enroll the
 * device anew. A session saved for another coordinator address is not
 * sent to this one: the client registers anew and overwrites it. Call one
 * of these before the first cycle, on the thread that runs the client. The
 * token is never logged. */

/* At most this many bytes are saved or loaded. */
#define COHORT_SESSION_MAX_BYTES 1024

/* The app's own storage (a keychain, a preferences store). load copies the
 * saved bytes, at most cap, into buf and sets *len (0: nothing saved yet);
 * save replaces them with len bytes, durably (a later load after a crash
 * gives either the old or the new bytes). Both return 0 on success, any
 * other value on failure. The bytes hold a private key and a session
 * token: keep them where only the app can read them. Called on the thread
 * that runs the client. */
typedef int (*cohort_session_load_cb)(void *user, uint8_t *buf, size_t cap,
                                      size_t *len);
typedef int (*cohort_session_save_cb)(void *user, const uint8_t *buf,
                                      size_t len);

/* Keeps c's session in the file at path (copied): created mode 0600, and
 * replaced atomically (a temporary file beside it, fsync, rename), so a
 * crash leaves the old or the new session, never half of one. The file is
 * read now. Returns COHORT_OK (a missing file too: the first registration
 * creates it), COHORT_EINVAL (NULL argument), COHORT_ESTATE (c has
 * registered already), COHORT_EAUTH (the file is not a regular file owned
 * by this user, or group or others may read or write it, as ssh refuses a
 * private key: chmod 600 it), COHORT_EIO (it cannot be read) or
 * COHORT_EFORMAT (truncated or corrupt: the client does not guess, nor
 * register a second time behind the app's back; delete the file to enroll
 * the device anew), with the reason, naming the file, in
 * cohort_client_last_error. A failure to save it after a registration ends
 * that cycle with COHORT_EIO, which also stops cohort_client_run; the
 * next cycle saves it again before anything else (and ends with COHORT_EIO
 * while that fails), so a restart is never a second client. */
COHORT_API int cohort_client_set_session_file(cohort_client_t *c,
                                              const char *path);

/* As cohort_client_set_session_file, through the app's callbacks; load is
 * called now, save after each registration. user is passed to both and
 * must outlive c. Returns COHORT_OK, COHORT_EINVAL, COHORT_ESTATE,
 * COHORT_EIO (load failed, or gave more than cap bytes) or
 * COHORT_EFORMAT (the bytes are not a saved session). */
COHORT_API int cohort_client_set_session_store(cohort_client_t *c,
                                               cohort_session_load_cb load,
                                               cohort_session_save_cb save,
                                               void *user);

/* Keeps the global model in an unnamed file in dir (the app's cache
 * directory; mode 0600, gone when the process ends) instead of in memory,
 * from the next download on: while the app's training callback runs, the
 * client then holds one copy of the model, the working weights, rather
 * than two. The file is written once per model and read twice per task
 * (to start the working copy and to take the delta), in 8 KiB blocks, its
 * digest checked on every read. The built-in trainer and the evaluation
 * callback read the whole model and load it into memory for the task.
 * dir NULL: back to memory. Drops the model kept so far. Call it between
 * cycles, on the thread that runs the client. Returns COHORT_OK,
 * COHORT_EINVAL (an empty dir) or COHORT_EIO (no file can be made in dir),
 * with the reason in cohort_client_last_error. */
COHORT_API int cohort_client_set_model_dir(cohort_client_t *c, const char *dir);

typedef enum cohort_cycle_outcome {
  COHORT_CYCLE_TRAINED = 0,   /* trained and uploaded an update */
  COHORT_CYCLE_RETRY = 1,     /* no task now; try again after retry_after_ms */
  COHORT_CYCLE_DONE = 2,      /* the federation is over */
  COHORT_CYCLE_EVALUATED = 3, /* evaluated the model and reported metrics */
  COHORT_CYCLE_DECLINED = 4,  /* declined an evaluation task: no evaluation
                                 callback and no dataset, or the callback
                                 declined */
} cohort_cycle_outcome;

/* What a cycle did (library to app: cohort_client_run_once passes this
 * header's sizeof with it, and the library writes only the fields that
 * size covers). */
typedef struct cohort_cycle_info {
  cohort_cycle_outcome outcome;
  uint64_t round;          /* round of the task, when TRAINED */
  uint32_t retry_after_ms; /* when RETRY; 0: check in again at once */
  uint64_t bytes_down;     /* bytes on the wire this cycle */
  uint64_t bytes_up;
  double train_loss;
  double eval_accuracy; /* the global model on local held-out data */
  /* When RETRY: why the coordinator did not select this client (a failed
   * eligibility condition, an exclusion, a full round), "" if it did not
   * say. */
  char not_selected[128];
} cohort_cycle_info;

/* One cycle: register if needed, check in, and when there is a task
 * download the model (resumable, digest verified), evaluate it on the local
 * dataset and report that, train, and upload the delta. info may be NULL.
 * Returns COHORT_OK (see info->outcome), COHORT_EUNAVAIL (coordinator not
 * reachable, or a rate limit: the wait is in cohort_client_last_error),
 * COHORT_EAUTH (enrollment refused, or the operator revoked this client:
 * it stays refused), COHORT_EREJECTED (the coordinator refused a request,
 * aborted the round's secure aggregation, or the session expired: the next
 * cycle registers again; cohort_client_last_error says why), COHORT_EABORTED
 * (this client could not follow the round's secure aggregation plan or
 * messages), COHORT_ETIMEDOUT (a secure-aggregation step did not close in
 * time), COHORT_ECANCELED (stopped, or leave_before_secagg reached),
 * COHORT_ECALLBACK, COHORT_EDIGEST or another negative status. Under
 * secure aggregation the cycle holds the round's secrets in memory only
 * while it runs, and wipes them before returning. */
#define cohort_client_run_once(c, info)                                        \
  cohort_client_run_once_sized((c), (info), sizeof(cohort_cycle_info))
COHORT_API int cohort_client_run_once_sized(cohort_client_t *c,
                                            cohort_cycle_info *info,
                                            size_t info_size);

/* Runs cycles until the federation is over (COHORT_OK), cohort_client_stop
 * is called or leave_before_secagg is reached (COHORT_ECANCELED), or a
 * permanent error (COHORT_EAUTH when revoked). Waits as the coordinator
 * says between check-ins and after a rate limit, rides out coordinator
 * restarts for up to give_up_after_s, registers again when its session
 * expires, and after a round
 * that failed for this client (refused, aborted, timed out) checks in
 * again. */
COHORT_API int cohort_client_run(cohort_client_t *c);

/* Asks cohort_client_run (or cohort_client_run_once) to return
 * COHORT_ECANCELED; safe from any thread or a signal handler. The run
 * returns within 1 s in every state: connecting to a coordinator that is
 * not there, backing off, waiting out a RetryLater, holding a long-poll
 * check-in, downloading, evaluating or training with the built-in engine,
 * uploading, and waiting in secure aggregation (for peers at SETUP, or
 * after its masked input for the step to close): calls and waits look at
 * the flag at least every 100 ms, the built-in engine before every batch.
 * Measured in tests/integration/test_client_stop.c (docs/benchmarks.md,
 * "Stopping through the library"): a median of 0.1 s or less in each. The
 * app's train and evaluate callbacks are not interrupted: the run returns
 * once the callback does, which it does soon when it polls
 * cohort_client_cancelled(req->client). The client stays stopped: a later run
 * returns COHORT_ECANCELED at once. */
COHORT_API void cohort_client_stop(cohort_client_t *c);

/* Whether cohort_client_stop was called on c: 1 or 0. For a training or
 * evaluation callback to poll (req->client) and return early, so that a
 * stop takes effect within its polling interval. Safe from any thread. */
COHORT_API int cohort_client_cancelled(const cohort_client_t *c);

/* Client id the coordinator assigned (0 before registration). */
COHORT_API uint64_t cohort_client_id(const cohort_client_t *c);

/* One-line description of the last failure of this client ("" if none);
 * valid until the next call on c. */
COHORT_API const char *cohort_client_last_error(const cohort_client_t *c);

/* Library log level: 0 debug, 1 info, 2 warn (default), 3 error, 4 off.
 * Logs go to standard error and never contain tokens. */
COHORT_API void cohort_set_log_level(int level);

/* Where the library's log lines go instead of standard error: sink gets
 * each message at or above the log level (0 debug .. 3 error) as one line
 * without a trailing newline (control bytes escaped), on the thread that
 * logged it. Calls are serialized: sink is never called on two threads at
 * once, and once cohort_set_log_sink returns, the previous sink is never
 * called again. NULL restores standard error. Messages never contain
 * tokens or keys. The sink must not call libcohort. Process-wide, like the
 * log level. */
typedef void (*cohort_log_sink)(int level, const char *message, void *user);
COHORT_API void cohort_set_log_sink(cohort_log_sink sink, void *user);

/* Library log format: 0 text (default), 1 JSON (one object a line with ts,
 * level, tag, pid and msg; control bytes escaped, invalid UTF-8 replaced).
 * Returns COHORT_OK, or COHORT_EINVAL for another value. To log to a file,
 * put the file on standard error (dup2). */
COHORT_API int cohort_set_log_format(int format);

/* Whether the training kernels can run as the COHORT_ISA environment
 * variable asks (avx512, avx2, sse2, neon or scalar; unset: the best this
 * CPU runs). Returns COHORT_OK with err set to "", or COHORT_EINVAL with
 * a message in err (cap bytes) naming the paths this CPU and build run;
 * the library then uses the best of them. The variable is read once per
 * process. */
COHORT_API int cohort_isa_check(char *err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
