/* ProcessPrng, the one function of Windows' bcryptprimitives.dll that Rust's standard
 * library (1.78 and later) imports for random bytes: Debian 12's wine (8.0) has no such
 * DLL, so a program built for Windows would not start under it. `make test-windows` builds
 * this stand-in into wine's prefix (never into a wheel); it takes the bytes from
 * RtlGenRandom, which wine has. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom, advapi32 */

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
