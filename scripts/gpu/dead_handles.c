/* Calls on streams and events whose context was destroyed (scripts/gpu/dead-handles.sh).
 * Usage: dead_handles CASE   with CASE one of stream_sync, stream_destroy, event_sync,
 * event_destroy, live (the same calls before the destroy: all must succeed).
 * Prints "CALL -> CODE" for the call under test, then "done"; a crash inside the driver
 * ends the process before "done". Driver-API only, linked with -lcuda; the prototypes are
 * declared here with the exported ABI names (cuda.h of CUDA 13.0 maps cuCtxCreate to _v4),
 * so it also builds against tests/programs' fake driver. */
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

extern CUresult cuInit(unsigned int);
extern CUresult cuDeviceGet(CUdevice *, int);
extern CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
extern CUresult cuCtxDestroy_v2(CUcontext);
extern CUresult cuStreamCreate(CUstream *, unsigned int);
extern CUresult cuStreamSynchronize(CUstream);
extern CUresult cuStreamDestroy_v2(CUstream);
extern CUresult cuEventCreate(CUevent *, unsigned int);
extern CUresult cuEventRecord(CUevent, CUstream);
extern CUresult cuEventSynchronize(CUevent);
extern CUresult cuEventDestroy_v2(CUevent);

#define SETUP(call)                                                   \
    do {                                                              \
        CUresult r_ = (call);                                         \
        if (r_ != 0) {                                                \
            printf("setup %s -> %d\n", #call, r_);                    \
            return 2;                                                 \
        }                                                             \
    } while (0)
#define SHOW(what, call)                                              \
    do {                                                              \
        fflush(stdout);                                               \
        CUresult r_ = (call);                                         \
        printf("%s -> %d\n", what, r_);                               \
        fflush(stdout);                                               \
    } while (0)

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "stream_sync";
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUevent e;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    SETUP(cuStreamCreate(&s, 0));
    SETUP(cuEventCreate(&e, 0));
    SETUP(cuEventRecord(e, s));
    SETUP(cuStreamSynchronize(s));
    if (strcmp(c, "live") == 0) {
        SHOW("cuEventSynchronize", cuEventSynchronize(e));
        SHOW("cuEventDestroy", cuEventDestroy_v2(e));
        SHOW("cuStreamSynchronize", cuStreamSynchronize(s));
        SHOW("cuStreamDestroy", cuStreamDestroy_v2(s));
        SETUP(cuCtxDestroy_v2(ctx));
    } else {
        SETUP(cuCtxDestroy_v2(ctx));
        if (strcmp(c, "stream_sync") == 0)
            SHOW("cuStreamSynchronize", cuStreamSynchronize(s));
        else if (strcmp(c, "stream_destroy") == 0)
            SHOW("cuStreamDestroy", cuStreamDestroy_v2(s));
        else if (strcmp(c, "event_sync") == 0)
            SHOW("cuEventSynchronize", cuEventSynchronize(e));
        else if (strcmp(c, "event_destroy") == 0)
            SHOW("cuEventDestroy", cuEventDestroy_v2(e));
        else
            return 2;
    }
    printf("done\n");
    return 0;
}
