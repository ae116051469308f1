/* A crash tracer for the GPU runs, where no gdb is installed: preloaded into a process
 * (LD_PRELOAD), it prints the native stack of a SIGSEGV, SIGBUS, SIGFPE or SIGABRT to stderr,
 * one frame a line as "library(+offset)", then dies by the same signal. The offsets of a
 * library built here are read back here: `addr2line -f -C -e build/wheel/libjaxmg_cuda.so
 * OFFSET` (build/wheel keeps the unstripped library of the shipped wheel).
 *
 *   gcc -shared -fPIC -O1 -o /tmp/segv_trace.so tests/gpu/segv_trace.c
 *   LD_PRELOAD=/tmp/segv_trace.so python ...
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t *info, void *context) {
  (void)context;
  char line[160];
  int n = snprintf(line, sizeof line, "\n[segv_trace] pid %d: signal %d (%s) at address %p\n",
                   (int)getpid(), sig, strsignal(sig), info ? info->si_addr : NULL);
  if (n > 0) (void)!write(2, line, (size_t)n);
  void *frames[96];
  int count = backtrace(frames, 96);
  backtrace_symbols_fd(frames, count, 2);
  (void)!write(2, "[segv_trace] end of stack\n", 26);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  static char stack[1 << 16];
  stack_t alt = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
  sigaltstack(&alt, NULL);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  int signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT};
  for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; ++i) {
    sigaction(signals[i], &action, NULL);
  }
}
