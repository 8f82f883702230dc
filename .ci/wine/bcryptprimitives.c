/* A stand-in for Windows' bcryptprimitives.dll, which Wine 8 (Debian 12)
 * lacks: Rust's std (and Go >= 1.22) load ProcessPrng from it at start, and
 * a program without it exits at once. ProcessPrng fills a buffer with
 * random bytes; here RtlGenRandom (advapi32's SystemFunction036) does.
 * Built by .ci/run with: x86_64-w64-mingw32-gcc -shared -O2 -o
 * bcryptprimitives.dll bcryptprimitives.c -ladvapi32 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
