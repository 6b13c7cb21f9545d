/* This process's memory as the kernel counts it (/proc/self), for the
 * tests that bound what a piece of work may add to the peak. */
#ifndef COHORT_PROC_MEM_H
#define COHORT_PROC_MEM_H

/* The kB of /proc/self/status's line key ("VmRSS:", "VmHWM:"), or -1. */
long proc_status_kb(const char *key);

/* Resets the peak (VmHWM) to the current RSS, so that the next peak is the
 * coming work's own: 0, or -1 when the kernel did not take it (a test
 * that goes on would compare against an old, higher peak and pass). */
int proc_peak_reset(void);

#endif
