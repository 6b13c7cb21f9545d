/* The admin token of the HTTP side port: one bound shared by the
 * coordinator, which reads it from --admin-token-file, and `cohort`, which
 * sends it, so that a token one of them accepts the other does too. */
#ifndef COHORT_ADMIN_TOKEN_H
#define COHORT_ADMIN_TOKEN_H

#define ADMIN_TOKEN_MAX_LEN 512 /* characters; longer is refused, not cut */

#endif
