/**
 * @chainkeys/signers: cosmjs, eosjs and bitcoinjs-lib signers backed by a
 * chainkeys service. This entry point imports no other package at run time;
 * the WharfKit plugin is at `@chainkeys/signers/wharfkit`.
 */
export { ChainkeysError, ApprovalPending } from "./errors.js";
export { ChainkeysClient } from "./client.js";
export { ChainkeysCosmosSigner } from "./cosmjs.js";
export { ChainkeysSignatureProvider } from "./eosjs.js";
export { signPsbt, coinOf } from "./bitcoinjs.js";
