// CUDA's library_types.h as loom's CUDA emulator provides it (tools/cuda/emu).
//
// The data-type and library-property enums the CUDA math libraries share
// (cuBLAS takes cudaDataType_t for its Ex calls; every library reports its
// version through libraryPropertyType), with CUDA's numeric values, so code
// that stores or prints them sees what it would see with the real toolkit.
// Only the real (non-complex) types and the complex types' values are listed;
// the fp8/fp6/fp4 and emulation-strategy enums of newer toolkits are not.
#pragma once

enum cudaDataType_t {
  CUDA_R_16F = 2,    // IEEE binary16 (__half)
  CUDA_C_16F = 6,
  CUDA_R_16BF = 14,  // bfloat16 (__nv_bfloat16)
  CUDA_C_16BF = 15,
  CUDA_R_32F = 0,
  CUDA_C_32F = 4,
  CUDA_R_64F = 1,
  CUDA_C_64F = 5,
  CUDA_R_4I = 16,
  CUDA_C_4I = 17,
  CUDA_R_4U = 18,
  CUDA_C_4U = 19,
  CUDA_R_8I = 3,
  CUDA_C_8I = 7,
  CUDA_R_8U = 8,
  CUDA_C_8U = 9,
  CUDA_R_16I = 20,
  CUDA_C_16I = 21,
  CUDA_R_16U = 22,
  CUDA_C_16U = 23,
  CUDA_R_32I = 10,
  CUDA_C_32I = 11,
  CUDA_R_32U = 12,
  CUDA_C_32U = 13,
  CUDA_R_64I = 24,
  CUDA_C_64I = 25,
  CUDA_R_64U = 26,
  CUDA_C_64U = 27,
};
typedef cudaDataType_t cudaDataType;

enum libraryPropertyType_t {
  MAJOR_VERSION = 0,
  MINOR_VERSION = 1,
  PATCH_LEVEL = 2,
};
typedef libraryPropertyType_t libraryPropertyType;
