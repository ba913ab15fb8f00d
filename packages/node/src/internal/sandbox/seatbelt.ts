/**
 * The macOS sandbox profile (SBPL, run with `sandbox-exec -p <profile>`), made from the same plan
 * as the Linux mount rules: everything readable except hidden paths, writes only under the
 * writable roots minus their read-only parts, no network except the local proxy port, and the
 * small set of system services a shell and its tools need to start.
 *
 * Every rule is written as an `allow` with `require-not` exceptions, so the result does not depend
 * on how the sandbox orders rules.
 *
 * @example
 * ```ts
 * const text = profile({ writable: ["/Users/me/app"], readOnly: ["/Users/me/app/.git"], hidden: ["/Users/me/.ssh"], proxyPort: undefined })
 * // "(version 1)\n(deny default)\n…"
 * ```
 */

export interface Plan {
  /** Folders (and files) a command may write; empty for `read-only`. */
  readonly writable: ReadonlyArray<string>
  /** Paths under a writable root that stay read-only (`.git`, `.muse`, …). */
  readonly readOnly: ReadonlyArray<string>
  /** Paths a command may not read (secrets). */
  readonly hidden: ReadonlyArray<string>
  /** The local port of the network proxy, when hosts are allowed; otherwise no network at all. */
  readonly proxyPort?: number | undefined
}

/** A string literal of the profile language: `"` and `\` escaped, control characters refused. */
export const literal = (s: string): string => {
  if (/[\u0000-\u001f\u007f]/.test(s))
    throw new Error(`a path with a control character cannot be sandboxed: ${JSON.stringify(s)}`)
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`
}

/** `(subpath …)` for a folder, or `(literal …)` too for a file path (a path may be either). */
const under = (p: string) => `(subpath ${literal(p)})`

const not = (paths: ReadonlyArray<string>) => paths.map((p) => `(require-not ${under(p)})`).join(" ")

const BASE = `(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow pseudo-tty)
(allow ipc-posix-sem)
(allow ipc-posix-shm-read-data)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.logd")
  (global-name "com.apple.FSEvents")
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.coreservices.launchservicesd")
  (global-name "com.apple.lsd.mapdb"))
(allow file-ioctl (literal "/dev/null") (literal "/dev/zero") (literal "/dev/random") (literal "/dev/urandom") (literal "/dev/tty") (regex #"^/dev/ttys[0-9]+$"))
(allow file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/stdout") (literal "/dev/stderr") (regex #"^/dev/fd/[0-9]+$"))`

/** The whole profile for `plan`. */
export const profile = (plan: Plan): string => {
  const lines = [BASE]
  lines.push(
    plan.hidden.length > 0 ? `(allow file-read* (require-all (subpath "/") ${not(plan.hidden)}))` : `(allow file-read*)`
  )
  for (const root of plan.writable) {
    const inside = plan.readOnly.filter((p) => p === root || p.startsWith(`${root}/`))
    const hidden = plan.hidden.filter((p) => p === root || p.startsWith(`${root}/`))
    const except = [...inside, ...hidden]
    lines.push(
      except.length > 0
        ? `(allow file-write* (require-all ${under(root)} ${not(except)}))`
        : `(allow file-write* ${under(root)})`
    )
  }
  if (plan.proxyPort !== undefined) {
    if (!Number.isInteger(plan.proxyPort) || plan.proxyPort < 1 || plan.proxyPort > 65535)
      throw new Error(`not a port: ${plan.proxyPort}`)
    lines.push(`(allow network-outbound (remote ip ${literal(`localhost:${plan.proxyPort}`)}))`)
  }
  return `${lines.join("\n")}\n`
}
