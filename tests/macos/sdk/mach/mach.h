/* mach/mach.h - the macOS SDK stand-in (tests/macos/sdk/README.md): task_info's basic info. */
#ifndef SDK_MACH_MACH_H
#define SDK_MACH_MACH_H
#include <stdint.h>
typedef int kern_return_t;
typedef int integer_t;
typedef unsigned int natural_t;
typedef natural_t mach_port_t;
typedef mach_port_t task_name_t;
typedef natural_t task_flavor_t;
typedef natural_t mach_msg_type_number_t;
typedef integer_t *task_info_t;
typedef uint64_t mach_vm_size_t;
typedef int policy_t;
typedef struct {
    integer_t seconds, microseconds;
} time_value_t;
#define KERN_SUCCESS 0
#define MACH_TASK_BASIC_INFO 20
#pragma pack(push, 4)
struct mach_task_basic_info {
    mach_vm_size_t virtual_size, resident_size, resident_size_max;
    time_value_t user_time, system_time;
    policy_t policy;
    integer_t suspend_count;
};
#pragma pack(pop)
typedef struct mach_task_basic_info mach_task_basic_info_data_t;
#define MACH_TASK_BASIC_INFO_COUNT                                                                \
    ((mach_msg_type_number_t)(sizeof(mach_task_basic_info_data_t) / sizeof(natural_t)))
extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_
kern_return_t task_info(task_name_t task, task_flavor_t flavor, task_info_t info,
                        mach_msg_type_number_t *count);
#endif
