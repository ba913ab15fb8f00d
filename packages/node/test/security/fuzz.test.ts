/**
 * Red-team corpus, fuzzed: seeded random compositions of operators, quoting, substitutions,
 * wrappers, paths and redirects. Two oracles that do not use the parser:
 *
 * - construction: the generator knows which simple commands each command line holds, and whether
 *   something in it keeps them from being known (a substitution, an expanded command name, …);
 * - execution: each command line the engine lets through really runs, in `sh` and in bash, with
 *   stub programs that log their argv.
 *
 * With `allow safe *` and `allow lint`, an allowed line must hold only those commands and run only
 * them; with `deny rm*` in auto mode, a line that holds or runs `rm` must never be allowed.
 */
import { describe, expect, it } from "vitest"
import { decide, sandbox } from "./support.js"

/** mulberry32: a small seeded generator, so every failure is reproducible from its seed. */
const rng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

interface Built {
  readonly text: string
  /** Simple commands in it: name as the shell finds it, argument count (-1: unknown). */
  readonly commands: ReadonlyArray<{ readonly name: string; readonly args: number; readonly bare: boolean }>
  /** Something keeps the commands from being known, or no rule may cover it. */
  readonly opaque: boolean
}

const STUBS = ["safe", "lint", "rm", "curl"]

const generator = (seed: number, bin: string) => {
  const r = rng(seed)
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(r() * xs.length)]!
  const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

  const name = (): { text: string; name: string; bare: boolean; opaque: boolean } => {
    const n = pick(STUBS)
    const v = Math.floor(r() * 11)
    switch (v) {
      case 7:
        // a line continuation inside the name: sh joins the two sides
        return { text: `${n[0]}\\\n${n.slice(1)}`, name: n, bare: true, opaque: false }
      case 8:
        return { text: `${n.slice(0, 1)}""${n.slice(1)}`, name: n, bare: true, opaque: false }
      case 0:
        return { text: `'${n}'`, name: n, bare: true, opaque: false }
      case 1:
        return { text: `"${n}"`, name: n, bare: true, opaque: false }
      case 2:
        return { text: `${n[0]}\\${n.slice(1)}`, name: n, bare: true, opaque: false }
      case 3:
        return { text: `${n.slice(0, 2)}''${n.slice(2)}`, name: n, bare: true, opaque: false }
      case 4:
        return { text: `${bin}/${n}`, name: n, bare: false, opaque: false }
      case 5:
        return { text: `$'${n}'`, name: n, bare: true, opaque: true }
      default:
        return { text: n, name: n, bare: true, opaque: false }
    }
  }

  const arg = (depth: number): { text: string; inner?: Built; args: number; opaque: boolean } => {
    const v = Math.floor(r() * 14)
    switch (v) {
      case 0:
        return { text: "'a b'", args: 1, opaque: false }
      case 1:
        return { text: '"x;y"', args: 1, opaque: false }
      case 2:
        return { text: "\\;", args: 1, opaque: false }
      case 3:
        return { text: "*.js", args: -1, opaque: false }
      case 4:
        return { text: "$HOME", args: -1, opaque: false }
      case 5:
        if (depth < 2) {
          const inner = list(depth + 1)
          return { text: `$(${inner.text})`, inner, args: -1, opaque: true }
        }
        return { text: "b", args: 1, opaque: false }
      case 6:
        if (depth < 2) {
          const inner = simple(depth + 1)
          return { text: `\`${inner.text.replace(/[`\\$]/g, "\\$&")}\``, inner, args: -1, opaque: true }
        }
        return { text: "c", args: 1, opaque: false }
      case 7:
        if (depth < 2) {
          const inner = simple(depth + 1)
          return { text: `<(${inner.text})`, inner, args: 1, opaque: true }
        }
        return { text: "d", args: 1, opaque: false }
      case 8:
        return { text: "'$(rm x)'", args: 1, opaque: false }
      default:
        return { text: pick(["a", "b", "x.js", "--flag", "-n1", "--"]), args: 1, opaque: false }
    }
  }

  const simple = (depth: number): Built => {
    const n = name()
    const args = Array.from({ length: Math.floor(r() * 3) }, () => arg(depth))
    const redirect = pick(["", "", "", " 2>&1", " >/dev/null", " > out.txt", " < in.txt"])
    const known = args.every((a) => a.args >= 0)
    return {
      text: [n.text, ...args.map((a) => a.text)].join(" ") + redirect,
      commands: [
        { name: n.name, args: known ? args.reduce((s, a) => s + a.args, 0) : -1, bare: n.bare },
        ...args.flatMap((a) => a.inner?.commands ?? [])
      ],
      opaque:
        n.opaque ||
        args.some((a) => a.opaque || a.inner?.opaque) ||
        redirect.includes("out.txt") ||
        redirect.includes("in.txt")
    }
  }

  const command = (depth: number): Built => {
    const v = Math.floor(r() * 12)
    if (depth >= 2 || v < 5) return simple(depth)
    const inner = v === 10 ? list(depth + 1) : simple(depth + 1)
    switch (v) {
      case 5:
        return {
          ...inner,
          text: `env ${pick(["", "FOO=1 "])}${inner.text}`,
          opaque: inner.opaque || inner.text.length < 0
        }
      case 6:
        return { ...inner, text: `timeout 5 ${inner.text}` }
      case 7:
        return { ...inner, text: `${pick(["bash", "sh"])} -c ${sq(inner.text)}` }
      case 8: {
        // the name in a variable: the shell runs it, no rule can see it
        return {
          ...inner,
          text: `x=${inner.commands[0]!.name}; $x`,
          commands: [{ name: inner.commands[0]!.name, args: 0, bare: true }],
          opaque: true
        }
      }
      case 9:
        return {
          ...inner,
          text: `echo a | xargs ${inner.text}`,
          commands: [...inner.commands.map((c) => ({ ...c, args: -1 })), { name: "xargs", args: -1, bare: true }],
          opaque: true
        }
      case 10:
        return { ...inner, text: `(${inner.text})` }
      default:
        return { ...inner, text: `{ ${inner.text}; }` }
    }
  }

  const list = (depth: number): Built => {
    const parts = Array.from({ length: 1 + Math.floor(r() * 3) }, () => {
      const a = command(depth)
      if (r() < 0.25) {
        const b = command(depth)
        return { text: `${a.text} | ${b.text}`, commands: [...a.commands, ...b.commands], opaque: a.opaque || b.opaque }
      }
      return a
    })
    let text = parts[0]!.text
    // the last two: a comment up to the newline, and an escaped carriage return before a newline
    for (const p of parts.slice(1)) {
      text += `${pick([" ; ", " && ", " || ", " & ", "\n", " # c\n", " \\\r\n"])}${p.text}`
    }
    return { text, commands: parts.flatMap((p) => p.commands), opaque: parts.some((p) => p.opaque) }
  }

  return () => list(0)
}

/** Whether the allow rules `safe *` and `lint` cover a simple command. */
const coveredByAllow = (c: { name: string; args: number; bare: boolean }) =>
  c.bare && (c.name === "safe" || (c.name === "lint" && c.args === 0))

const SEEDS = 5
const PER_SEED = 60

describe("red team: fuzzed command lines against two oracles", () => {
  it(`${SEEDS * PER_SEED} seeded command lines: no allowed line holds or runs more than its rules allow`, async () => {
    const box = sandbox(STUBS)
    let allowedByRules = 0
    let askedOrDenied = 0
    let withRm = 0
    let executed = 0
    try {
      for (let seed = 1; seed <= SEEDS; seed++) {
        const next = generator(seed, box.bin)
        for (let i = 0; i < PER_SEED; i++) {
          const built = next()
          const where = `seed ${seed} #${i}: ${JSON.stringify(built.text)}`
          const allow = await decide(built.text, { mode: "ask", rules: ["allow:safe *", "allow:lint"] })
          const deny = await decide(built.text, { mode: "auto", rules: ["deny:rm*"] })
          // the execution oracle matters where a line is let through: run those
          const ran =
            allow === "allow" || deny === "allow"
              ? ["/bin/sh", "/bin/bash"].flatMap((shell) =>
                  box.run(built.text, shell).map(([n, ...args]) => ({ name: n!, args: args.length }))
                )
              : []
          if (allow === "allow") {
            allowedByRules++
            // construction oracle: only covered commands, nothing opaque
            expect(built.opaque, where).toBe(false)
            for (const c of built.commands) expect(coveredByAllow(c), `${where} holds ${c.name}`).toBe(true)
            // execution oracle: only covered commands ran
            for (const c of ran)
              expect(c.name === "safe" || (c.name === "lint" && c.args === 0), `${where} ran ${c.name}`).toBe(true)
          } else askedOrDenied++
          const holdsRm = built.commands.some((c) => c.name === "rm")
          if (holdsRm) {
            withRm++
            expect(deny, `${where} holds rm`).not.toBe("allow")
          }
          if (deny === "allow") {
            executed++
            expect(
              ran.some((c) => c.name === "rm"),
              `${where} ran rm`
            ).toBe(false)
          }
        }
      }
    } finally {
      box.cleanup()
    }
    // the corpus exercises both sides
    expect(allowedByRules).toBeGreaterThan(SEEDS * PER_SEED * 0.015)
    expect(askedOrDenied).toBeGreaterThan(SEEDS * PER_SEED * 0.5)
    expect(withRm).toBeGreaterThan(SEEDS * PER_SEED * 0.3)
    expect(executed).toBeGreaterThan(SEEDS * PER_SEED * 0.12)
  }, 600_000)
})
