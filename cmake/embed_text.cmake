# cmake -DIN=file -DOUT=file.cpp -DNAME=kName -DNAMESPACE=ns -P embed_text.cmake: writes
# OUT defining `const char* const NAME` (in NAMESPACE) as IN's text, so that code compiled
# at run time (NVRTC) includes the very source the build compiled.
file(READ "${IN}" text)
string(FIND "${text}" ")rlx_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string's delimiter")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake: do not edit.\n"
  "namespace ${NAMESPACE} {\nextern const char* const ${NAME};\n"
  "const char* const ${NAME} = R\"rlx_embed(${text})rlx_embed\";\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
