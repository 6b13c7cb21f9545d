# Writes the bytes of IN as a C array to OUT (a header), so the dashboard
# is part of the binary: cmake -DIN=... -DOUT=... -DNAME=... -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from ${IN} by embed.cmake. */\n"
  "static const unsigned char ${NAME}[] = {\n${bytes}0};\n"
  "#define ${NAME}_LEN ((size_t)${len})\n")
