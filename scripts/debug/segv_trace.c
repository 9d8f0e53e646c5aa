// On a machine without gdb: where a process segfaulted, by object, offset and nearest symbol.
//   gcc -shared -fPIC -O1 -o /tmp/segv_trace.so scripts/debug/segv_trace.c -ldl
//   LD_PRELOAD=/tmp/segv_trace.so python3 -m pytest -p no:faulthandler ...   (faulthandler would replace it)
// Offsets inside libtileops.so: addr2line -f -C -i -e build/libtileops.so <offset>.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
static char stk[1 << 17];
static void say(const char* buf, int n) {
  if (write(2, buf, n) < 0) _exit(139);
}
static void where(const char* tag, void* pc) {
  Dl_info d; char buf[512];
  if (dladdr(pc, &d) && d.dli_fname) {
    int n = snprintf(buf, sizeof buf, "%s %p %s(+%#lx) %s\n", tag, pc, d.dli_fname,
                     (unsigned long)((char*)pc - (char*)d.dli_fbase), d.dli_sname ? d.dli_sname : "?");
    say(buf, n);
  } else {
    int n = snprintf(buf, sizeof buf, "%s %p ?\n", tag, pc);
    say(buf, n);
  }
}
static void h(int sig, siginfo_t* si, void* ctx) {
  (void)sig;
  ucontext_t* uc = (ucontext_t*)ctx;
  char b[128];
  int n = snprintf(b, sizeof b, "SEGV at addr %p\n", si->si_addr);
  say(b, n);
  where("pc", (void*)uc->uc_mcontext.gregs[REG_RIP]);
  // frame-pointer walk (best effort), then glibc backtrace (may fault again: SA_RESETHAND)
  void** fp = (void**)uc->uc_mcontext.gregs[REG_RBP];
  for (int i = 0; i < 40 && fp && ((unsigned long)fp & 7) == 0; ++i) {
    void* ret = fp[1]; if (!ret) break; where("fp", ret); void** nx = (void**)fp[0];
    if (nx <= fp || (char*)nx - (char*)fp > (1 << 20)) break;
    fp = nx;
  }
  void* a[64]; int k = backtrace(a, 64);
  for (int i = 0; i < k; ++i) where("bt", a[i]);
  _exit(139);
}
__attribute__((constructor)) static void init(void) {
  stack_t ss = {.ss_sp = stk, .ss_size = sizeof stk}; sigaltstack(&ss, 0);
  struct sigaction sa; memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = h; sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND; sigaction(SIGSEGV, &sa, 0);
}
