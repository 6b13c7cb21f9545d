/* cohort-report: a report of earlier simulated runs from their CSV files;
 * the work is sim_report_main's (sim_report.h), which cohort-sim shares. */
#include "sim_report.h"

int main(int argc, char **argv) { return sim_report_main(argc, argv); }
