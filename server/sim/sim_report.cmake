# The simulator's report writer and CSV files (sim/sim_report.h), and
# cohort-report, which makes a report of earlier runs' CSV files. Included
# from server/CMakeLists.txt; cohort-sim links cohort_sim_report.
add_library(cohort_sim_report STATIC sim/sim_report.c sim/sim_report_csv.c
  sim/sim_report_main.c)
target_include_directories(cohort_sim_report PUBLIC
  ${CMAKE_CURRENT_SOURCE_DIR}/sim)
target_link_libraries(cohort_sim_report PUBLIC cohort_common m)

add_executable(cohort-report sim/cohort_report.c)
target_link_libraries(cohort-report PRIVATE cohort_sim_report)
install(TARGETS cohort-report RUNTIME DESTINATION bin)
