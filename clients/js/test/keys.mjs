// Well-known public test keys, copied from the project's shared key vectors
// (vectors.json keys[]: private_key_hex and the EOS forms). Never real funds.
export const KEYS = {
  "scalar-two": {
    "private_key_hex": "0000000000000000000000000000000000000000000000000000000000000002",
    "eos": {
      "public_key_legacy": "EOS6PhSs6H49U1Lb6vz9GDtUF9RjtpFpkS6Rxm94LumQrnD1YqfSG",
      "public_key_k1": "PUB_K1_6PhSs6H49U1Lb6vz9GDtUF9RjtpFpkS6Rxm94LumQrnCziKzkb",
      "private_key_k1": "PVT_K1_1111111111111111111111111111111F1xnK6"
    }
  },
  "scalar-three": {
    "private_key_hex": "0000000000000000000000000000000000000000000000000000000000000003",
    "eos": {
      "public_key_legacy": "EOS6nEZsuNhDnknxVTf1YH454nxiB5MpVSN7gQktMRioqRiAXfJpk",
      "public_key_k1": "PUB_K1_6nEZsuNhDnknxVTf1YH454nxiB5MpVSN7gQktMRioqRi9HEyDq",
      "private_key_k1": "PVT_K1_1111111111111111111111111111111ScCgbk"
    }
  },
  "bitcoin-wiki-wif-example": {
    "private_key_hex": "0c28fca386c7a227600b2fe50b7cae11ec86d3bf1fbe471be89827e19d72aa1d",
    "eos": {
      "public_key_legacy": "EOS6UUbAGbTLLWfY2gAc8XmjGBz2c7WT4fYB5r1L1aHDwAY88ujex",
      "public_key_k1": "PUB_K1_6UUbAGbTLLWfY2gAc8XmjGBz2c7WT4fYB5r1L1aHDwAY8Mg9dj",
      "private_key_k1": "PVT_K1_6Mcb23muAxyXaSMhmB6B1mqkvLdWhtuFZmnZsxDczHRvQdp32"
    }
  },
  "eosio-dev-key": {
    "private_key_hex": "d2653ff7cbb2d8ff129ac27ef5781ce68b2558c41a74af1f2ddca635cbeef07d",
    "eos": {
      "public_key_legacy": "EOS6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5GDW5CV",
      "public_key_k1": "PUB_K1_6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5BoDq63",
      "private_key_k1": "PVT_K1_2bfGi9rYsXQSXXTvJbDAPhHLQUojjaNLomdm3cEJ1XTzMqUt3V"
    }
  }
};
