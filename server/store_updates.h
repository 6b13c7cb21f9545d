/* Internal to the store: the bytes of the updates kept for the round in
 * progress, in one append-only file per round next to the database
 * (<db>.updates/round-<R>, 0600 in a 0700 directory), so that SQLite holds
 * only their place. A file lives until its round ends; then it is kept as
 * round-spare, which the next round writes over (store_updates.c). */
#ifndef COHORT_STORE_UPDATES_H
#define COHORT_STORE_UPDATES_H

#include <stddef.h>
#include <stdint.h>

typedef struct store_updates store_updates;

/* The files of the database at db_path (borrowed). A path without a
 * directory of its own (":memory:", "") gets a private temporary directory
 * instead, made on the first append and removed by store_updates_close.
 * Nothing is created here. owner: the store of the coordinator, which
 * parks an ended round's file as the spare; another (the admin CLI's, a
 * reader's) leaves the spare to the coordinator that may be running.
 * Returns COHORT_OK or COHORT_ENOMEM. */
int store_updates_open(const char *db_path, int owner, store_updates **out);
/* Closes the open file; removes the spare (when u is the owner) and a
 * temporary directory. Accepts NULL. */
void store_updates_close(store_updates *u);

/* Appends len bytes of data to round's file (creating the directory and
 * the file on the round's first update) and sets *offset to where they
 * start. Not fsynced: once written they survive a crash of the process, not
 * a loss of power. One file is kept open, the last round appended to.
 * Returns COHORT_OK or COHORT_EIO, with the reason in why. Thread-safe. */
int store_updates_append(store_updates *u, int64_t round, const uint8_t *data,
                         size_t len, uint64_t *offset, char *why,
                         size_t whylen);
/* A place of len bytes at the end of round's file (created as by
 * store_updates_append), for an update whose chunks come one by one
 * (store_updates_write_at); nothing is written. Returns COHORT_OK or
 * COHORT_EIO, with the reason in why. Thread-safe. */
int store_updates_reserve(store_updates *u, int64_t round, size_t len,
                          uint64_t *offset, char *why, size_t whylen);
/* Writes len bytes of data at offset of round's file, which must be the
 * open one (a round that has ended has no file to write to any more:
 * COHORT_ENOTFOUND). COHORT_EIO, with the reason in why, when the write
 * fails. Thread-safe. */
int store_updates_write_at(store_updates *u, int64_t round, uint64_t offset,
                           const uint8_t *data, size_t len, char *why,
                           size_t whylen);
/* Reads len bytes at offset of round's file into *out (malloc'd, the
 * caller frees it). COHORT_ENOTFOUND when the file is missing or shorter,
 * COHORT_EIO when it cannot be read, COHORT_ENOMEM. Thread-safe. */
int store_updates_read(store_updates *u, int64_t round, uint64_t offset,
                       uint64_t len, uint8_t **out);
/* Closes round's file, if any, cuts it to what this process wrote and
 * keeps it as the spare for the next round (unlinks it when it cannot, or
 * when it was not the open file): call it only once the transaction that
 * ended the round has committed. */
void store_updates_remove(store_updates *u, int64_t round);
/* Unlinks every round file for which keep(ctx, round) returns 0, or every
 * one when keep is NULL (closing the open one among them), and the spare. */
void store_updates_prune(store_updates *u,
                         int (*keep)(void *ctx, int64_t round), void *ctx);

#endif
