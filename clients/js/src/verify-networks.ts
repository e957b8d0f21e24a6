/**
 * The networks `verifyApproval` (verify.ts) reads: this package's own table of each
 * chain's public parameters (chain ids, bech32 prefixes, base58 version bytes), as a
 * wallet keeps them, never read from the server whose approval is being checked.
 *
 * Every network a chainkeys server serves is here, testnets and regtests too. A network
 * missing from this table is a difference, never a pass: its addresses cannot be
 * written as its wallets write them. Beyond the request's own decoding, the network is
 * held to two things: the request's chain id is the network's (a testnet request shown
 * under a mainnet's name, or the reverse, is named), and the account is the address the
 * signer's public key has on that network (cosmjs, bitcoinjs-lib `payments`).
 */
import type { Network } from "bitcoinjs-lib";
import { peer } from "./client.js";

export interface Net {
  chainId?: string;
  hrp?: string; // Cosmos addresses; Litecoin's segwit outputs
  pubKeyHash?: number;
  scriptHash?: number;
}

const cosmos = (chainId: string, hrp: string): Net => ({ chainId, hrp });
const eos = (chainId: string): Net => ({ chainId });

export const NETWORKS: Record<string, Record<string, Net>> = {
  cosmos: { // the chains' registries (chain_id, bech32_prefix)
    cosmoshub: cosmos("cosmoshub-4", "cosmos"),
    "cosmoshub-testnet": cosmos("provider", "cosmos"), // the ICS provider testnet
    osmosis: cosmos("osmosis-1", "osmo"),
    "osmosis-testnet": cosmos("osmo-test-5", "osmo"),
    juno: cosmos("juno-1", "juno"),
    akash: cosmos("akashnet-2", "akash"),
    stargaze: cosmos("stargaze-1", "stars"),
    celestia: cosmos("celestia", "celestia"),
  },
  dogecoin: { // Dogecoin Core chainparams.cpp (no segwit addresses)
    mainnet: { pubKeyHash: 0x1e, scriptHash: 0x16 },
    testnet: { pubKeyHash: 0x71, scriptHash: 0xc4 },
    regtest: { pubKeyHash: 0x6f, scriptHash: 0xc4 },
  },
  litecoin: { // Litecoin Core chainparams.cpp
    mainnet: { hrp: "ltc", pubKeyHash: 0x30, scriptHash: 0x32 },
    testnet: { hrp: "tltc", pubKeyHash: 0x6f, scriptHash: 0x3a },
    regtest: { hrp: "rltc", pubKeyHash: 0x6f, scriptHash: 0x3a },
  },
  eos: { // each chain's id (the hash of its genesis)
    eos: eos("aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906"),
    jungle4: eos("73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d"),
    wax: eos("1064487b3cd1a897ce03ae5b6a865651747e2e152090f99c1d19d44e01aea5a4"),
    telos: eos("4667b205c6838ef70ff7988f6e8257e8be0e1284a2f59699054a018f743b1d11"),
  },
};

const MESSAGE_PREFIX: Record<string, string> = {
  dogecoin: "\x19Dogecoin Signed Message:\n",
  litecoin: "\x19Litecoin Signed Message:\n",
};

type Signer = { address: string; public_key: string; network: string; address_type?: string };

/** Why the signer's network cannot be verified here (null: it can). */
export function unknown(family: string, signer: Signer): string | null {
  const known = NETWORKS[family] ?? {};
  if (Object.hasOwn(known, signer.network)) return null;
  return `network: ${family} ${JSON.stringify(signer.network)} is not a network this client knows (${Object.keys(known).join(", ")})`;
}

/** The signer's network (`unknown` has said it is one). */
export const netOf = (family: string, signer: Signer): Net => NETWORKS[family][signer.network];

/** A UTXO network as bitcoinjs-lib takes it, for addresses and the message prefix
 * (its bip32 and wif versions are Bitcoin's: no key is read or written here). A network
 * with no segwit addresses gets a prefix no address has; `utxoAddress` writes none. */
export function bitcoinjsNetwork(family: string, net: Net): Network {
  return { messagePrefix: MESSAGE_PREFIX[family], bech32: net.hrp ?? "none",
    bip32: { public: 0x0488b21e, private: 0x0488ade4 }, pubKeyHash: net.pubKeyHash!, scriptHash: net.scriptHash!, wif: 0x80 };
}

const isWitness = (s: Uint8Array): boolean =>
  s.length >= 4 && (s[0] === 0 || (s[0] >= 0x51 && s[0] <= 0x60)) && s[1] === s.length - 2;

/** The address `script` pays on `net` as its wallets write it; null for a script with
 * no address there (a bare multisig, OP_RETURN, a segwit output on Dogecoin). */
export async function utxoAddress(family: string, net: Net, script: Uint8Array): Promise<string | null> {
  const btc = await peer(() => import("bitcoinjs-lib"), "bitcoinjs-lib", "verifying approvals");
  if (isWitness(script) && !net.hrp) return null;
  try { return btc.address.fromOutputScript(script, bitcoinjsNetwork(family, net)); } catch { return null; }
}

const unhex = (s: string): Uint8Array => Uint8Array.from((s.match(/../g) ?? []).map((h) => parseInt(h, 16)));
const b64 = (s: string): Uint8Array => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

/** The address the signer's public key has on `net` (null: an EOS account's name, which
 * its key does not make). */
async function ownAddress(family: string, net: Net, signer: Signer): Promise<string | null> {
  if (family === "cosmos") {
    const { pubkeyToAddress, encodeSecp256k1Pubkey } = await peer(() => import("@cosmjs/amino"), "@cosmjs/amino", "verifying approvals");
    return pubkeyToAddress(encodeSecp256k1Pubkey(b64(signer.public_key)), net.hrp!);
  }
  if (!(family in MESSAGE_PREFIX)) return null;
  const btc = await peer(() => import("bitcoinjs-lib"), "bitcoinjs-lib", "verifying approvals");
  const network = bitcoinjsNetwork(family, net);
  const pubkey = unhex(signer.public_key);
  const kind = signer.address_type ?? "p2pkh";
  const p2wpkh = btc.payments.p2wpkh({ pubkey, network });
  if (kind === "p2pkh") return btc.payments.p2pkh({ pubkey, network }).address ?? null;
  if (kind === "p2wpkh") return p2wpkh.address ?? null;
  return btc.payments.p2sh({ redeem: p2wpkh, network }).address ?? null;
}

/** What the request's chain id and the account say against the signer's network. */
export async function networkDifferences(family: string, signer: Signer, account: string, chainId: string | null | undefined): Promise<string[]> {
  const net = netOf(family, signer);
  const found: string[] = [];
  const said = chainId != null && family === "eos" ? chainId.toLowerCase() : chainId; // hex
  if (said != null && net.chainId !== undefined && said !== net.chainId) {
    found.push(`chain_id: the request is for ${JSON.stringify(chainId)}, ${family} ${JSON.stringify(signer.network)} is ${JSON.stringify(net.chainId)}`);
  }
  let own: string | null;
  try {
    own = await ownAddress(family, net, signer);
  } catch (e) { // a key that is no key, or a peer not installed: said, never passed
    return [...found, `account: the signer's public key does not decode here (${e instanceof Error ? e.message : String(e)})`];
  }
  if (own !== null && own !== account) {
    found.push(`account: the approval says ${JSON.stringify(account)}, the signer's key on ${JSON.stringify(signer.network)} is ${JSON.stringify(own)}`);
  }
  return found;
}
