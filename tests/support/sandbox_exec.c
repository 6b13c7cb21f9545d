/* Runs a command under the kernel's own forms of what the systemd unit
 * (packaging/systemd) asks: no new privileges, no memory both writable and
 * executable (PR_SET_MDWE, the kernel's MemoryDenyWriteExecute), and a
 * seccomp allow-list of system calls, the others failing with EPERM (its
 * SystemCallFilter= with SystemCallErrorNumber=EPERM). systemd itself is
 * not needed, so packaging_sandbox runs where systemd is not PID 1.
 *
 *   sandbox_exec NUMBERS_FILE COMMAND [ARG...]
 *
 * NUMBERS_FILE holds the allowed system call numbers, one a line. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SANDBOX_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SANDBOX_ARCH AUDIT_ARCH_AARCH64
#endif
#ifndef PR_SET_MDWE /* Linux 6.3; Debian 12's headers predate it */
#define PR_SET_MDWE 65
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

#define MAX_ALLOWED 1024 /* Linux has about 460 system calls */
#define SKIPPED 77       /* ctest's SKIP_RETURN_CODE */

/* Reads at most MAX_ALLOWED numbers; returns how many, or -1. */
static int read_numbers(const char *path, unsigned *nr) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "sandbox_exec: %s: %s\n", path, strerror(errno));
    return -1;
  }
  int n = 0;
  unsigned v;
  while (n < MAX_ALLOWED && fscanf(f, "%u", &v) == 1)
    nr[n++] = v;
  int rc = ferror(f) || !feof(f) ? -1 : n;
  if (rc < 0)
    fprintf(stderr, "sandbox_exec: %s: not a list of at most %d numbers\n",
            path, MAX_ALLOWED);
  fclose(f);
  return rc;
}

int main(int argc, char **argv) {
#ifndef SANDBOX_ARCH
  fprintf(stderr, "sandbox_exec: no seccomp architecture for this CPU\n");
  return SKIPPED;
#else
  if (argc < 3) {
    fprintf(stderr, "usage: sandbox_exec NUMBERS_FILE COMMAND [ARG...]\n");
    return 2;
  }
  static unsigned nr[MAX_ALLOWED];
  int n = read_numbers(argv[1], nr);
  if (n < 0)
    return 2;
  /* Another architecture's calls are refused outright (the unit's
   * SystemCallArchitectures=native); then one test per allowed number. */
  static struct sock_filter prog[4 + 2 * MAX_ALLOWED + 1];
  size_t k = 0;
  prog[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                           offsetof(struct seccomp_data, arch));
  prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                           SANDBOX_ARCH, 1, 0);
  prog[k++] =
      (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  prog[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                           offsetof(struct seccomp_data, nr));
  for (int i = 0; i < n; i++) {
    prog[k++] =
        (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr[i], 0, 1);
    prog[k++] =
        (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  prog[k++] =
      (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
  struct sock_fprog fprog = {(unsigned short)k, prog};

  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    perror("sandbox_exec: PR_SET_NO_NEW_PRIVS");
    return 2;
  }
  if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0) {
    fprintf(stderr, "sandbox_exec: this kernel has no PR_SET_MDWE (%s)\n",
            strerror(errno));
    return SKIPPED;
  }
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
    perror("sandbox_exec: PR_SET_SECCOMP");
    return SKIPPED;
  }
  execvp(argv[2], argv + 2);
  fprintf(stderr, "sandbox_exec: %s: %s\n", argv[2], strerror(errno));
  return 2;
#endif
}
