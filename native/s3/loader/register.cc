// Registers the s3:// file system in every Python program that imports TensorFlow, without a change to
// the program: TensorFlow loads each library in site-packages/tensorflow-plugins/ as it is imported, and
// this one's initializer hands TensorFlow the plugin (built to SMTRAIN_S3_PLUGIN) through the C API.
// SMTRAIN_S3_FILESYSTEM=off leaves s3:// unregistered (another plugin may then take it).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensorflow/c/tf_status.h"

extern "C" void TF_RegisterFilesystemPlugin(const char* plugin_filename, TF_Status* status);  // tensorflow/c/c_api.h

__attribute__((constructor)) static void RegisterS3() {
  const char* off = getenv("SMTRAIN_S3_FILESYSTEM");
  if (off != nullptr && strcmp(off, "off") == 0) return;
  TF_Status* status = TF_NewStatus();
  TF_RegisterFilesystemPlugin(SMTRAIN_S3_PLUGIN, status);
  if (TF_GetCode(status) != TF_OK && strstr(TF_Message(status), "already registered") == nullptr)
    fprintf(stderr, "smtrain: s3:// file system not registered (%s): %s\n", SMTRAIN_S3_PLUGIN, TF_Message(status));
  TF_DeleteStatus(status);
}
