/**
 * The seccomp filter bubblewrap installs (`--seccomp FD`) for sandboxed commands, as a classic BPF
 * program: it refuses to create unix-domain sockets (`socket(AF_UNIX, …)`), so a command cannot
 * reach a local service through a socket file the mount rules left visible (a container daemon,
 * an ssh or gpg agent, D-Bus: each can run commands outside the sandbox), and it refuses
 * `io_uring_setup` (io_uring can create and connect sockets without the `socket` call).
 * `socketpair` stays allowed: it connects only the two ends it makes.
 *
 * @example
 * ```ts
 * const bpf = unixSocketFilter("x64") // Buffer of struct sock_filter, or undefined on other CPUs
 * ```
 */

/** `errno` a refused call returns: EAFNOSUPPORT ("Address family not supported by protocol"). */
export const REFUSED_ERRNO = 97

const LD_W_ABS = 0x20
const JEQ_K = 0x15
const RET_K = 0x06
const RET_ALLOW = 0x7fff0000
const RET_ERRNO = 0x00050000

const AF_UNIX = 1
const AUDIT_ARCH_X86_64 = 0xc000003e
const AUDIT_ARCH_I386 = 0x40000003
const AUDIT_ARCH_AARCH64 = 0xc00000b7
const X32_BIT = 0x40000000

/** System call numbers per architecture (`socket`, `io_uring_setup`, i386's `socketcall`). */
const NR = {
  x64: { arch: AUDIT_ARCH_X86_64, socket: 41, ioUring: 425 },
  arm64: { arch: AUDIT_ARCH_AARCH64, socket: 198, ioUring: 425 },
  i386: { arch: AUDIT_ARCH_I386, socket: 359, socketcall: 102, ioUring: 425 }
} as const

type Insn = readonly [code: number, jt: number, jf: number, k: number]

/** A program with symbolic jump targets, resolved to relative offsets. */
const assemble = (program: ReadonlyArray<Insn | { label: string } | { jeq: number; yes: string; no: string }>) => {
  const labels = new Map<string, number>()
  let pc = 0
  for (const i of program) {
    if ("label" in i) labels.set(i.label, pc)
    else pc++
  }
  const out: Array<Insn> = []
  for (const i of program) {
    if ("label" in i) continue
    if ("jeq" in i) {
      const at = out.length
      const rel = (l: string) => {
        const to = labels.get(l)
        if (to === undefined || to <= at || to - at - 1 > 255) throw new Error(`bad jump to ${l}`)
        return to - at - 1
      }
      out.push([JEQ_K, rel(i.yes), rel(i.no), i.jeq])
    } else out.push(i)
  }
  const buf = Buffer.alloc(out.length * 8)
  out.forEach(([code, jt, jf, k], n) => {
    buf.writeUInt16LE(code, n * 8)
    buf.writeUInt8(jt, n * 8 + 2)
    buf.writeUInt8(jf, n * 8 + 3)
    buf.writeUInt32LE(k >>> 0, n * 8 + 4)
  })
  return buf
}

const ld = (offset: number): Insn => [LD_W_ABS, 0, 0, offset]
const ret = (k: number): Insn => [RET_K, 0, 0, k >>> 0]

/**
 * The filter for a CPU (`process.arch`), or `undefined` where it is not known (the sandbox then
 * runs without it and says so). On x64 the 32-bit entry points (i386 and x32) are covered too.
 */
export const unixSocketFilter = (arch: string = process.arch): Buffer | undefined => {
  if (arch !== "x64" && arch !== "arm64") return undefined
  const native = arch === "x64" ? NR.x64 : NR.arm64
  return assemble([
    ld(4), // seccomp_data.arch
    { jeq: native.arch, yes: "native", no: arch === "x64" ? "i386" : "allow" },
    { label: "native" },
    ld(0), // seccomp_data.nr
    { jeq: native.ioUring, yes: "deny", no: "n1" },
    { label: "n1" },
    { jeq: native.socket, yes: "domain", no: arch === "x64" ? "x32" : "allow" },
    ...(arch === "x64"
      ? [
          { label: "x32" },
          { jeq: X32_BIT | native.socket, yes: "domain", no: "x32uring" },
          { label: "x32uring" },
          { jeq: X32_BIT | native.ioUring, yes: "deny", no: "allow" },
          { label: "i386" },
          { jeq: NR.i386.arch, yes: "i386nr", no: "allow" },
          { label: "i386nr" },
          ld(0),
          // socketcall passes its arguments in memory, where a filter cannot look: refused whole
          { jeq: NR.i386.socketcall, yes: "deny", no: "i1" },
          { label: "i1" },
          { jeq: NR.i386.ioUring, yes: "deny", no: "i2" },
          { label: "i2" },
          { jeq: NR.i386.socket, yes: "domain", no: "allow" }
        ]
      : []),
    { label: "domain" },
    ld(16), // low 32 bits of args[0] (little-endian)
    { jeq: AF_UNIX, yes: "deny", no: "allow" },
    { label: "allow" },
    ret(RET_ALLOW),
    { label: "deny" },
    ret(RET_ERRNO | REFUSED_ERRNO)
  ])
}
