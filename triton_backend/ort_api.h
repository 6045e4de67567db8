// The part of ONNX Runtime's C API this backend uses, declared from the documented
// onnxruntime_c_api.h (no package ships the header): the enums' values, the entry point's
// table, and `OrtApi`, a table of function pointers that grows only at its end, so a
// prefix of it (the members through the last one used, each at its place; unused ones as
// untyped slots) is valid for every library that serves the API version asked for. Every
// member here is in API version 13's table (ONNX Runtime 1.13 and later).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct OrtEnv;
struct OrtStatus;
struct OrtMemoryInfo;
struct OrtIoBinding;
struct OrtSession;
struct OrtValue;
struct OrtRunOptions;
struct OrtTypeInfo;
struct OrtTensorTypeAndShapeInfo;
struct OrtSessionOptions;
struct OrtCUDAProviderOptionsV2;
struct OrtAllocator;

constexpr uint32_t kOrtApiVersion = 13;

typedef enum {
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 = 2,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 = 3,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16 = 4,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 = 5,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 = 7,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING = 8,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32 = 12,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64 = 13,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64 = 14,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128 = 15,
  ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 = 16
} ONNXTensorElementDataType;

typedef enum { ORT_LOGGING_LEVEL_WARNING = 2 } OrtLoggingLevel;
typedef enum { ORT_ENABLE_ALL = 99 } GraphOptimizationLevel;
typedef enum { ORT_SEQUENTIAL = 0 } ExecutionMode;
typedef enum { OrtDeviceAllocator = 0 } OrtAllocatorType;
typedef enum { OrtMemTypeDefault = 0 } OrtMemType;

struct OrtApi {
  void* CreateStatus;  // 0
  void* GetErrorCode;  // 1
  const char* (*GetErrorMessage)(const OrtStatus* status);  // 2
  OrtStatus* (*CreateEnv)(OrtLoggingLevel log_severity_level, const char* logid, OrtEnv** out);  // 3
  void* CreateEnvWithCustomLogger;  // 4
  void* EnableTelemetryEvents;  // 5
  void* DisableTelemetryEvents;  // 6
  OrtStatus* (*CreateSession)(const OrtEnv* env, const char* model_path, const OrtSessionOptions* options, OrtSession** out);  // 7
  void* CreateSessionFromArray;  // 8
  void* Run;  // 9
  OrtStatus* (*CreateSessionOptions)(OrtSessionOptions** options);  // 10
  void* SetOptimizedModelFilePath;  // 11
  void* CloneSessionOptions;  // 12
  OrtStatus* (*SetSessionExecutionMode)(OrtSessionOptions* options, ExecutionMode execution_mode);  // 13
  void* EnableProfiling;  // 14
  void* DisableProfiling;  // 15
  void* EnableMemPattern;  // 16
  void* DisableMemPattern;  // 17
  void* EnableCpuMemArena;  // 18
  void* DisableCpuMemArena;  // 19
  void* SetSessionLogId;  // 20
  void* SetSessionLogVerbosityLevel;  // 21
  void* SetSessionLogSeverityLevel;  // 22
  OrtStatus* (*SetSessionGraphOptimizationLevel)(OrtSessionOptions* options, GraphOptimizationLevel graph_optimization_level);  // 23
  OrtStatus* (*SetIntraOpNumThreads)(OrtSessionOptions* options, int intra_op_num_threads);  // 24
  OrtStatus* (*SetInterOpNumThreads)(OrtSessionOptions* options, int inter_op_num_threads);  // 25
  void* CreateCustomOpDomain;  // 26
  void* CustomOpDomain_Add;  // 27
  void* AddCustomOpDomain;  // 28
  void* RegisterCustomOpsLibrary;  // 29
  OrtStatus* (*SessionGetInputCount)(const OrtSession* session, size_t* out);  // 30
  OrtStatus* (*SessionGetOutputCount)(const OrtSession* session, size_t* out);  // 31
  void* SessionGetOverridableInitializerCount;  // 32
  OrtStatus* (*SessionGetInputTypeInfo)(const OrtSession* session, size_t index, OrtTypeInfo** type_info);  // 33
  void* SessionGetOutputTypeInfo;  // 34
  void* SessionGetOverridableInitializerTypeInfo;  // 35
  OrtStatus* (*SessionGetInputName)(const OrtSession* session, size_t index, OrtAllocator* allocator, char** value);  // 36
  OrtStatus* (*SessionGetOutputName)(const OrtSession* session, size_t index, OrtAllocator* allocator, char** value);  // 37
  void* SessionGetOverridableInitializerName;  // 38
  OrtStatus* (*CreateRunOptions)(OrtRunOptions** out);  // 39
  void* RunOptionsSetRunLogVerbosityLevel;  // 40
  void* RunOptionsSetRunLogSeverityLevel;  // 41
  void* RunOptionsSetRunTag;  // 42
  void* RunOptionsGetRunLogVerbosityLevel;  // 43
  void* RunOptionsGetRunLogSeverityLevel;  // 44
  void* RunOptionsGetRunTag;  // 45
  void* RunOptionsSetTerminate;  // 46
  void* RunOptionsUnsetTerminate;  // 47
  void* CreateTensorAsOrtValue;  // 48
  OrtStatus* (*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo* info, void* p_data, size_t p_data_len, const int64_t* shape, size_t shape_len, ONNXTensorElementDataType type, OrtValue** out);  // 49
  void* IsTensor;  // 50
  OrtStatus* (*GetTensorMutableData)(OrtValue* value, void** out);  // 51
  void* FillStringTensor;  // 52
  void* GetStringTensorDataLength;  // 53
  void* GetStringTensorContent;  // 54
  OrtStatus* (*CastTypeInfoToTensorInfo)(const OrtTypeInfo* type_info, const OrtTensorTypeAndShapeInfo** out);  // 55
  void* GetOnnxTypeFromTypeInfo;  // 56
  void* CreateTensorTypeAndShapeInfo;  // 57
  void* SetTensorElementType;  // 58
  void* SetDimensions;  // 59
  OrtStatus* (*GetTensorElementType)(const OrtTensorTypeAndShapeInfo* info, ONNXTensorElementDataType* out);  // 60
  OrtStatus* (*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo* info, size_t* out);  // 61
  OrtStatus* (*GetDimensions)(const OrtTensorTypeAndShapeInfo* info, int64_t* dim_values, size_t dim_values_length);  // 62
  void* GetSymbolicDimensions;  // 63
  void* GetTensorShapeElementCount;  // 64
  OrtStatus* (*GetTensorTypeAndShape)(const OrtValue* value, OrtTensorTypeAndShapeInfo** out);  // 65
  void* GetTypeInfo;  // 66
  void* GetValueType;  // 67
  OrtStatus* (*CreateMemoryInfo)(const char* name, OrtAllocatorType type, int id, OrtMemType mem_type, OrtMemoryInfo** out);  // 68
  OrtStatus* (*CreateCpuMemoryInfo)(OrtAllocatorType type, OrtMemType mem_type, OrtMemoryInfo** out);  // 69
  void* CompareMemoryInfo;  // 70
  void* MemoryInfoGetName;  // 71
  void* MemoryInfoGetId;  // 72
  void* MemoryInfoGetMemType;  // 73
  void* MemoryInfoGetType;  // 74
  void* AllocatorAlloc;  // 75
  OrtStatus* (*AllocatorFree)(OrtAllocator* ort_allocator, void* p);  // 76
  void* AllocatorGetInfo;  // 77
  OrtStatus* (*GetAllocatorWithDefaultOptions)(OrtAllocator** out);  // 78
  void* AddFreeDimensionOverride;  // 79
  void* GetValue;  // 80
  void* GetValueCount;  // 81
  void* CreateValue;  // 82
  void* CreateOpaqueValue;  // 83
  void* GetOpaqueValue;  // 84
  void* KernelInfoGetAttribute_float;  // 85
  void* KernelInfoGetAttribute_int64;  // 86
  void* KernelInfoGetAttribute_string;  // 87
  void* KernelContext_GetInputCount;  // 88
  void* KernelContext_GetOutputCount;  // 89
  void* KernelContext_GetInput;  // 90
  void* KernelContext_GetOutput;  // 91
  void* ReleaseEnv;  // 92
  void (*ReleaseStatus)(OrtStatus* input);  // 93
  void (*ReleaseMemoryInfo)(OrtMemoryInfo* input);  // 94
  void (*ReleaseSession)(OrtSession* input);  // 95
  void (*ReleaseValue)(OrtValue* input);  // 96
  void (*ReleaseRunOptions)(OrtRunOptions* input);  // 97
  void (*ReleaseTypeInfo)(OrtTypeInfo* input);  // 98
  void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo* input);  // 99
  void (*ReleaseSessionOptions)(OrtSessionOptions* input);  // 100
  void* ReleaseCustomOpDomain;  // 101
  void* GetDenotationFromTypeInfo;  // 102
  void* CastTypeInfoToMapTypeInfo;  // 103
  void* CastTypeInfoToSequenceTypeInfo;  // 104
  void* GetMapKeyType;  // 105
  void* GetMapValueType;  // 106
  void* GetSequenceElementType;  // 107
  void* ReleaseMapTypeInfo;  // 108
  void* ReleaseSequenceTypeInfo;  // 109
  void* SessionEndProfiling;  // 110
  void* SessionGetModelMetadata;  // 111
  void* ModelMetadataGetProducerName;  // 112
  void* ModelMetadataGetGraphName;  // 113
  void* ModelMetadataGetDomain;  // 114
  void* ModelMetadataGetDescription;  // 115
  void* ModelMetadataLookupCustomMetadataMap;  // 116
  void* ModelMetadataGetVersion;  // 117
  void* ReleaseModelMetadata;  // 118
  void* CreateEnvWithGlobalThreadPools;  // 119
  void* DisablePerSessionThreads;  // 120
  void* CreateThreadingOptions;  // 121
  void* ReleaseThreadingOptions;  // 122
  void* ModelMetadataGetCustomMetadataMapKeys;  // 123
  void* AddFreeDimensionOverrideByName;  // 124
  void* GetAvailableProviders;  // 125
  void* ReleaseAvailableProviders;  // 126
  void* GetStringTensorElementLength;  // 127
  void* GetStringTensorElement;  // 128
  void* FillStringTensorElement;  // 129
  void* AddSessionConfigEntry;  // 130
  void* CreateAllocator;  // 131
  void* ReleaseAllocator;  // 132
  OrtStatus* (*RunWithBinding)(OrtSession* session, const OrtRunOptions* run_options, const OrtIoBinding* binding_ptr);  // 133
  OrtStatus* (*CreateIoBinding)(OrtSession* session, OrtIoBinding** out);  // 134
  void (*ReleaseIoBinding)(OrtIoBinding* input);  // 135
  OrtStatus* (*BindInput)(OrtIoBinding* binding_ptr, const char* name, const OrtValue* val_ptr);  // 136
  void* BindOutput;  // 137
  OrtStatus* (*BindOutputToDevice)(OrtIoBinding* binding_ptr, const char* name, const OrtMemoryInfo* mem_info_ptr);  // 138
  void* GetBoundOutputNames;  // 139
  OrtStatus* (*GetBoundOutputValues)(const OrtIoBinding* binding_ptr, OrtAllocator* allocator, OrtValue*** output, size_t* output_count);  // 140
  void* ClearBoundInputs;  // 141
  void* ClearBoundOutputs;  // 142
  void* TensorAt;  // 143
  void* CreateAndRegisterAllocator;  // 144
  void* SetLanguageProjection;  // 145
  void* SessionGetProfilingStartTimeNs;  // 146
  void* SetGlobalIntraOpNumThreads;  // 147
  void* SetGlobalInterOpNumThreads;  // 148
  void* SetGlobalSpinControl;  // 149
  void* AddInitializer;  // 150
  void* CreateEnvWithCustomLoggerAndGlobalThreadPools;  // 151
  void* SessionOptionsAppendExecutionProvider_CUDA;  // 152
  void* SessionOptionsAppendExecutionProvider_ROCM;  // 153
  void* SessionOptionsAppendExecutionProvider_OpenVINO;  // 154
  void* SetGlobalDenormalAsZero;  // 155
  void* CreateArenaCfg;  // 156
  void* ReleaseArenaCfg;  // 157
  void* ModelMetadataGetGraphDescription;  // 158
  void* SessionOptionsAppendExecutionProvider_TensorRT;  // 159
  void* SetCurrentGpuDeviceId;  // 160
  void* GetCurrentGpuDeviceId;  // 161
  void* KernelInfoGetAttributeArray_float;  // 162
  void* KernelInfoGetAttributeArray_int64;  // 163
  void* CreateArenaCfgV2;  // 164
  OrtStatus* (*AddRunConfigEntry)(OrtRunOptions* options, const char* config_key, const char* config_value);  // 165
  void* CreatePrepackedWeightsContainer;  // 166
  void* ReleasePrepackedWeightsContainer;  // 167
  void* CreateSessionWithPrepackedWeightsContainer;  // 168
  void* CreateSessionFromArrayWithPrepackedWeightsContainer;  // 169
  void* SessionOptionsAppendExecutionProvider_TensorRT_V2;  // 170
  void* CreateTensorRTProviderOptions;  // 171
  void* UpdateTensorRTProviderOptions;  // 172
  void* GetTensorRTProviderOptionsAsString;  // 173
  void* ReleaseTensorRTProviderOptions;  // 174
  void* EnableOrtCustomOps;  // 175
  void* RegisterAllocator;  // 176
  void* UnregisterAllocator;  // 177
  void* IsSparseTensor;  // 178
  void* CreateSparseTensorAsOrtValue;  // 179
  void* FillSparseTensorCoo;  // 180
  void* FillSparseTensorCsr;  // 181
  void* FillSparseTensorBlockSparse;  // 182
  void* CreateSparseTensorWithValuesAsOrtValue;  // 183
  void* UseCooIndices;  // 184
  void* UseCsrIndices;  // 185
  void* UseBlockSparseIndices;  // 186
  void* GetSparseTensorFormat;  // 187
  void* GetSparseTensorValuesTypeAndShape;  // 188
  void* GetSparseTensorValues;  // 189
  void* GetSparseTensorIndicesTypeShape;  // 190
  void* GetSparseTensorIndices;  // 191
  void* HasValue;  // 192
  void* KernelContext_GetGPUComputeStream;  // 193
  void* GetTensorMemoryInfo;  // 194
  void* GetExecutionProviderApi;  // 195
  void* SessionOptionsSetCustomCreateThreadFn;  // 196
  void* SessionOptionsSetCustomThreadCreationOptions;  // 197
  void* SessionOptionsSetCustomJoinThreadFn;  // 198
  void* SetGlobalCustomCreateThreadFn;  // 199
  void* SetGlobalCustomThreadCreationOptions;  // 200
  void* SetGlobalCustomJoinThreadFn;  // 201
  void* SynchronizeBoundInputs;  // 202
  void* SynchronizeBoundOutputs;  // 203
  OrtStatus* (*SessionOptionsAppendExecutionProvider_CUDA_V2)(OrtSessionOptions* options, const OrtCUDAProviderOptionsV2* cuda_options);  // 204
  OrtStatus* (*CreateCUDAProviderOptions)(OrtCUDAProviderOptionsV2** out);  // 205
  OrtStatus* (*UpdateCUDAProviderOptions)(OrtCUDAProviderOptionsV2* cuda_options, const char* const* provider_options_keys, const char* const* provider_options_values, size_t num_keys);  // 206
  OrtStatus* (*GetCUDAProviderOptionsAsString)(const OrtCUDAProviderOptionsV2* cuda_options, OrtAllocator* allocator, char** ptr);  // 207
  void (*ReleaseCUDAProviderOptions)(OrtCUDAProviderOptionsV2* input);  // 208
};

struct OrtApiBase {
  const OrtApi* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};

// the library's one exported entry: `const OrtApiBase* OrtGetApiBase(void)` (found by dlsym)

}  // extern "C"
