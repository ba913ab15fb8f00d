/**
 * What the sandbox blocked, read from a sandboxed command's output: the error messages the refused
 * system calls produce (EROFS for a write outside the writable folders, EACCES on a hidden path,
 * EXDEV for a hard link across the sandbox's edge, EAFNOSUPPORT for a unix socket, an unreachable
 * network, a process limit), turned into one line each for the model and the user:
 * `blocked by the sandbox: write to /etc/x (outside the writable folders …)`.
 *
 * @example
 * ```ts
 * explain("touch: cannot touch '/etc/x': Read-only file system\n", context)
 * // ["write to /etc/x (outside the writable folders: /work/app, /tmp)"]
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"

export interface Context {
  readonly mode: "read-only" | "workspace-write"
  /** The command's working directory (relative paths in messages are resolved against it). */
  readonly cwd: string
  /** Writable folders as the command saw them (empty in `read-only`, except the private /tmp). */
  readonly writable: ReadonlyArray<string>
  /** Read-only paths inside writable folders (`.git`, `.muse`, …). */
  readonly readOnly: ReadonlyArray<string>
  /** Hidden paths (secrets). */
  readonly hidden: ReadonlyArray<string>
  /** The network: none, or the allowed hosts. */
  readonly allowedHosts: ReadonlyArray<string>
  /** Destinations the proxy refused during the command. */
  readonly refusedHosts: ReadonlyArray<string>
  readonly processLimit?: number | undefined
  readonly unixSocketsBlocked: boolean
}

const within = (p: string, dir: string) => p === dir || p.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

/** Paths a message names: quoted (`'…'`, `"…"`, `‘…’`, `` `…' ``) or bare words that look like paths. */
const pathsIn = (line: string): Array<string> => {
  const out: Array<string> = []
  for (const m of line.matchAll(/['"‘`“]([^'"’`”\n]+)['"’`”]/g)) out.push(m[1]!)
  for (const m of line.matchAll(/(?:^|[\s:(=])((?:\/|\.{1,2}\/|~\/)[^\s:'"’”,)]*)/g)) out.push(m[1]!)
  // "sh: 1: cannot create x: Read-only file system", "bash: x: Permission denied"
  const shell = /(?:cannot create|cannot open|can't create|can't open)\s+([^:]+):/.exec(line)
  if (shell) out.push(shell[1]!.trim())
  const bash = /^(?:[\w./-]+: )?(?:line \d+: )?([^:\s][^:]*): (?:Read-only file system|Permission denied)/.exec(line)
  if (bash) out.push(bash[1]!.trim())
  return [...new Set(out.filter((p) => p !== "" && !/\s{2,}/.test(p)))]
}

const absolute = (p: string, cwd: string) => path.resolve(cwd, p.startsWith("~/") ? p : p)

/** Where a write to `p` lands: symlinks followed, a missing tail kept as it is. */
const landing = (p: string): string => {
  let head = p
  const tail: Array<string> = []
  for (let i = 0; i < 64 && head !== path.dirname(head); i++) {
    try {
      const target = fs.readlinkSync(head)
      return landing(path.join(path.resolve(path.dirname(head), target), ...tail))
    } catch {}
    try {
      return path.join(fs.realpathSync(head), ...tail)
    } catch {}
    tail.unshift(path.basename(head))
    head = path.dirname(head)
  }
  return p
}

const describeWrite = (abs: string, ctx: Context): string => {
  const real = landing(abs)
  const shown = real === abs ? abs : `${abs} (a link to ${real})`
  if (ctx.mode === "read-only") return `write to ${shown}: the sandbox is read-only; only /tmp is writable`
  const ro = ctx.readOnly.find((r) => within(real, r) || within(abs, r))
  if (ro) return `write to ${shown}: ${path.basename(ro)} stays read-only in the sandbox`
  return `write to ${shown}: outside the writable folders (${[...ctx.writable, "/tmp"].join(", ")})`
}

const NETWORK =
  /Network is unreachable|ENETUNREACH|Could not resolve host|Temporary failure in name resolution|Name or service not known|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|Could not resolve hostname|nodename nor servname|No address associated with hostname|Failed to establish a new connection|Connection refused|ECONNREFUSED|Couldn't connect to server|Failed to connect to/i

/** One line per thing the sandbox blocked (empty when the output shows none). */
export const explain = (output: string, ctx: Context): ReadonlyArray<string> => {
  const found: Array<string> = []
  const add = (s: string) => {
    if (!found.includes(s) && found.length < 8) found.push(s)
  }
  for (const host of ctx.refusedHosts) add(`network connection to ${host} (not in the sandbox's allowed hosts)`)
  const lines = output.length > 256 * 1024 ? output.slice(-256 * 1024).split("\n") : output.split("\n")
  // bubblewrap (or the long-lived sandbox's supervisor) failed before the command started (it says so
  // on the first line)
  const first = /^(bwrap|muse-sandbox): ([^\n]{1,400})/.exec(output)
  if (first) add(`the sandbox could not start the command (${first[1]}: ${first[2]})`)
  let network = false
  let forks = false
  for (const line of lines) {
    if (line.length > 4096) continue
    if (/Read-only file system|EROFS/i.test(line)) {
      const p = pathsIn(line)[0]
      add(p ? describeWrite(absolute(p, ctx.cwd), ctx) : "a write outside the writable folders")
    } else if (/Permission denied|EACCES/i.test(line)) {
      for (const p of pathsIn(line)) {
        const abs = absolute(p, ctx.cwd)
        const hidden = ctx.hidden.find((h) => within(abs, h))
        if (hidden) {
          add(`read of ${abs}: ${hidden} is hidden by the sandbox`)
          break
        }
      }
    } else if (/Invalid cross-device link|EXDEV/i.test(line)) {
      const p = pathsIn(line)
      add(`hard link ${p.length > 0 ? `${p.join(" => ")} ` : ""}across the sandbox's edge`)
    } else if (ctx.unixSocketsBlocked && /Address family not supported|EAFNOSUPPORT/i.test(line)) {
      add("a unix-domain socket (local services such as docker, ssh-agent or D-Bus are out of reach)")
    } else if (NETWORK.test(line)) network = true
    else if (
      /fork: (?:retry: )?Resource temporarily unavailable|Cannot fork|can't fork|fork failed|spawn E?AGAIN/i.test(line)
    )
      forks = true
  }
  if (network && ctx.refusedHosts.length === 0)
    add(
      ctx.allowedHosts.length === 0
        ? "network access (the sandbox has no network)"
        : `network access (only ${ctx.allowedHosts.join(", ")} through the proxy HTTP(S)_PROXY names)`
    )
  if (forks && ctx.processLimit !== undefined)
    add(`starting a process beyond the sandbox's limit of ${ctx.processLimit}`)
  return found
}
