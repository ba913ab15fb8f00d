// picomatch ships no type declarations; the part of its API used here.
declare module "picomatch" {
  type Matcher = (input: string) => boolean
  const picomatch: (glob: string, options?: { readonly dot?: boolean }) => Matcher
  export default picomatch
}
