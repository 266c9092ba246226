/* Tessera's NCCL-compatible C API (libtessera_nccl.so).
 *
 * NCCL's names, enum values and semantics (NCCL 2.21-compatible, plus the
 * 2.28 AlltoAll/Gather/Scatter) over Tessera's host-memory communicator.
 * A C program written against NCCL's nccl.h compiles against this header
 * (C11 or C++) and runs after linking -ltessera_nccl instead of -lnccl.
 * Differences (docs/nccl.md):
 *   - Buffers are host memory (ncclMemAlloc: zero-copy shared memory).
 *   - The stream argument is a Tessera stream (tesseraStreamCreate below;
 *     cudaStream_t is typedef'd to it): an ordered queue of operations of
 *     this process; tesseraStreamSynchronize waits for them. A NULL stream
 *     means the call completes before it returns.
 *   - ncclUint32/ncclUint64 reduce with sum/prod only; fp8 types move data
 *     (broadcast, gathers, all-to-all, send/recv) but do not reduce.
 *   - ncclCommCuDevice reports 0 (ncclCommInitAll: the devlist entry).
 * Environment: NCCL_DEBUG, NCCL_ALGO and NCCL_SOCKET_IFNAME are read as
 * TESSERA_DEBUG, TESSERA_ALGO and TESSERA_SOCKET_IFNAME when those are
 * unset. Thread-safety as NCCL: calls on one communicator from several
 * threads are ordered by submission; group state is per thread.
 */
#ifndef TESSERA_NCCL_H_
#define TESSERA_NCCL_H_

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 21
#define NCCL_PATCH 5
#define NCCL_SUFFIX ""
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE 22105
/* Tessera's own marker, for programs that want to know. */
#define TESSERA_NCCL 1

#ifdef __cplusplus
extern "C" {
#endif

/* Streams: ordered queues of communication operations (host side). */
typedef struct tesseraStream* tesseraStream_t;
#ifndef TESSERA_NCCL_NO_CUDA_STREAM
typedef tesseraStream_t cudaStream_t;
#endif

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1

typedef struct ncclConfig_v21700 {
  /* attributes that users should never touch. */
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* attributes that users are able to customize. */
  int blocking;       /* 0: init/split return ncclInProgress at once */
  int cgaClusterSize; /* accepted, ignored */
  int minCTAs;        /* accepted, ignored */
  int maxCTAs;        /* accepted, ignored */
  const char* netName; /* accepted, ignored */
  int splitShare;     /* accepted, ignored */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                   \
  {                                                                                               \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT                                              \
  }

typedef enum {
  ncclNumOps_dummy = 5
} ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum {
  ncclScalarDevice = 0,       /* a pointer read when each operation runs */
  ncclScalarHostImmediate = 1 /* the value is read at creation */
} ncclScalarResidence_t;

/* Versions, ids, errors. */
ncclResult_t ncclGetVersion(int* version);
/* Starts the rendezvous (a TCP store in this process, which must outlive
 * the communicators made from the id) and encodes its address and a
 * random job token: send the id to the other ranks (file, MPI_Bcast). */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
const char* ncclGetErrorString(ncclResult_t result);
/* The message of the last failing call of this thread ("" if none). */
const char* ncclGetLastError(ncclComm_t comm);

/* Memory: zero-copy shared memory (Tessera's AllocShared). */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);

/* Communicators. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
/* Accepted for compatibility; host buffers need no registration. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);

/* Reduction operators. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* Collectives (counts as in NCCL). */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
/* count elements to / from each rank (send and recv hold count * nranks). */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
/* count elements from each rank; recvbuff (count * nranks) at the root. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
/* count elements to each rank; sendbuff (count * nranks) at the root. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/* Point to point. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

/* Groups: calls between Start and End are issued together at the
 * outermost End (sends and receives paired, so exchanges do not
 * deadlock); End returns the first error. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

/* Tessera streams. Synchronize waits (bounded by the operation timeout)
 * for every operation enqueued so far and returns the first error;
 * Query returns ncclSuccess when all are done, ncclInProgress otherwise;
 * Destroy synchronizes first. */
ncclResult_t tesseraStreamCreate(tesseraStream_t* stream);
ncclResult_t tesseraStreamSynchronize(tesseraStream_t stream);
ncclResult_t tesseraStreamQuery(tesseraStream_t stream);
ncclResult_t tesseraStreamDestroy(tesseraStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TESSERA_NCCL_H_ */
